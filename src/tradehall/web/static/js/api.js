// Every request the pages make goes through this module: public market data, signed calls
// (HMAC-SHA256 with WebCrypto, as README "Signing a request" describes), the admin API, and
// `watch`, the one place that decides how often data is polled. The live alternative, the
// WebSocket streams, is in stream.js.

const SPOT = '/spot/open/sapi/v1';
const FUTURES = '/futures/open/fapi/v1';
const ADMIN = '/admin/v1';
const SANDBOX = '/sandbox/v1';
const encoder = new TextEncoder();

export class ApiError extends Error {
  constructor(status, code, msg) {
    super(msg);
    this.status = status;
    this.code = code;
  }
}

async function send(method, url, headers = {}, body = undefined) {
  let response;
  try {
    response = await fetch(url, { method, headers, body, cache: 'no-store', credentials: 'omit' });
  } catch (err) {
    throw new ApiError(0, 0, `the server cannot be reached (${err.message})`);
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    throw new ApiError(response.status, 0, `unexpected answer (HTTP ${response.status})`);
  }
  if (!response.ok) {
    const code = data && typeof data.code === 'number' ? data.code : 0;
    const msg = data && typeof data.msg === 'string' ? data.msg : `HTTP ${response.status}`;
    throw new ApiError(response.status, code, msg);
  }
  return data;
}

function queryOf(params) {
  const entries = Object.entries(params || {}).filter(([, v]) => v !== undefined && v !== null);
  return new URLSearchParams(entries.map(([k, v]) => [k, String(v)])).toString();
}

function get(path, params) {
  const query = queryOf(params);
  return send('GET', query ? `${path}?${query}` : path);
}

// ------------------------------------------------------------------ public market data
// A market is {kind: 'spot' | 'futures', symbol}.

export const market = {
  symbols: () => get(`${SPOT}/symbols`).then((d) => d.symbols),
  contracts: () => get(`${FUTURES}/contracts`),
  spotTicker: (symbol) => get(`${SPOT}/ticker`, { symbol }),
  futuresTickers: () => get(`${FUTURES}/ticker_all`),
  depth: (m, limit = 20) =>
    m.kind === 'spot'
      ? get(`${SPOT}/depth`, { symbol: m.symbol, limit })
      : get(`${FUTURES}/depth`, { contractName: m.symbol, limit }),
  // The futures API has no public trade list: null says so.
  trades: (m, limit = 30) =>
    m.kind === 'spot'
      ? get(`${SPOT}/trades`, { symbol: m.symbol, limit }).then((d) => d.list)
      : Promise.resolve(null),
  klines: (m, interval, limit = 300) =>
    m.kind === 'spot'
      ? get(`${SPOT}/klines`, { symbol: m.symbol, interval, limit })
      : get(`${FUTURES}/klines`, { contractName: m.symbol, interval, limit }),
  index: (m) => get(`${FUTURES}/index`, { contractName: m.symbol }),
  serverTime: () => get(`${SPOT}/time`).then((d) => d.serverTime),
};

// ------------------------------------------------------------------ self-service accounts
// Served only when the server offers them ([sandbox] self_service; docs/api.md).

export const sandbox = {
  createAccount: () => send('POST', `${SANDBOX}/accounts`, { 'Content-Type': 'application/json' }, '{}'),
};

// ------------------------------------------------------------------ signed calls

function hex(buffer) {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, '0')).join('');
}

// Timestamps from the shared worker (timestamps.js), so that tabs signed in with one key never
// sign with the same one. Where shared workers are missing or fail, each tab keeps its own
// increasing counter (as within one tab anyway); an answer later than SHARED_CLOCK_WAIT_MS (a
// browser stalled that long) is not waited for, that once.
const SHARED_CLOCK_WAIT_MS = 10000;

function openSharedClock() {
  if (!('SharedWorker' in globalThis)) return null;
  let worker;
  try {
    worker = new SharedWorker('/web/js/timestamps.js', { name: 'tradehall-timestamps' });
  } catch {
    return null;
  }
  const waiting = new Map();
  let nextId = 0;
  let broken = false;
  const giveUp = () => {
    broken = true;
    for (const resolve of waiting.values()) resolve(null);
    waiting.clear();
  };
  worker.addEventListener('error', giveUp);
  worker.port.onmessage = ({ data }) => {
    const resolve = waiting.get(data.id);
    waiting.delete(data.id);
    if (resolve) resolve(data.ts);
  };
  worker.port.start();
  return (wanted) => {
    if (broken) return Promise.resolve(null);
    return new Promise((resolve) => {
      const id = ++nextId;
      waiting.set(id, resolve);
      setTimeout(() => {
        waiting.delete(id);
        resolve(null);
      }, SHARED_CLOCK_WAIT_MS);
      worker.port.postMessage({ id, wanted });
    });
  };
}

let sharedClock;

async function sharedTimestamp(wanted) {
  if (sharedClock === undefined) sharedClock = openSharedClock();
  return sharedClock ? sharedClock(wanted) : null;
}

export class Session {
  // Only the API key and a non-extractable CryptoKey are kept, in memory: the secret text is
  // not stored anywhere and never sent.
  constructor(apiKey, cryptoKey, clockOffset) {
    this.apiKey = apiKey;
    this.cryptoKey = cryptoKey;
    this.clockOffset = clockOffset;
    this.lastTs = 0;
  }

  static async open(apiKey, secret) {
    if (!globalThis.crypto || !crypto.subtle) {
      throw new ApiError(0, 0, 'signing needs a secure context: open the page over https or on localhost');
    }
    const cryptoKey = await crypto.subtle.importKey(
      'raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign'],
    );
    const before = Date.now();
    const serverTime = await market.serverTime();
    const offset = serverTime - Math.round((before + Date.now()) / 2);
    const session = new Session(apiKey, cryptoKey, offset);
    await session.spot('GET', '/account'); // proves the key and the secret
    return session;
  }

  async timestamp() {
    // Strictly increasing, in this tab and across the tabs of this origin (sharedTimestamp):
    // the server accepts each signature once.
    const wanted = Math.max(Date.now() + this.clockOffset, this.lastTs + 1);
    this.lastTs = wanted;
    const shared = await sharedTimestamp(wanted);
    const ts = Math.max(shared ?? wanted, wanted);
    this.lastTs = Math.max(this.lastTs, ts);
    return ts;
  }

  // gateway: the URL prefix the signature leaves out ('/spot/open' or '/futures/open').
  async call(gateway, method, path, params = {}) {
    const query = method === 'GET' ? queryOf(params) : '';
    const body = method === 'GET' ? '' : JSON.stringify(params);
    const requestPath = query ? `${path}?${query}` : path;
    const ts = String(await this.timestamp());
    const signature = await crypto.subtle.sign(
      'HMAC', this.cryptoKey, encoder.encode(ts + method + requestPath + body),
    );
    const headers = { 'X-CH-APIKEY': this.apiKey, 'X-CH-TS': ts, 'X-CH-SIGN': hex(signature) };
    if (method !== 'GET') headers['Content-Type'] = 'application/json';
    return send(method, gateway + requestPath, headers, method === 'GET' ? undefined : body);
  }

  spot(method, path, params) {
    return this.call('/spot/open', method, `/sapi/v1${path}`, params);
  }

  futures(method, path, params) {
    return this.call('/futures/open', method, `/fapi/v1${path}`, params);
  }

  // The first message of a private stream (docs/websocket.md, "Private streams").
  async streamHello(path) {
    const ts = String(await this.timestamp());
    const message = encoder.encode(`${ts}GET${path}`);
    const signature = await crypto.subtle.sign('HMAC', this.cryptoKey, message);
    return { event: 'sub', params: { apiKey: this.apiKey, ts, sign: hex(signature) } };
  }

  account = () => this.spot('GET', '/account');
  // The caller's margin account on a pair, or null when it has none (-2017).
  marginAccount = (symbol) => this.spot('GET', '/margin/tradehall/account', { symbol })
    .catch((err) => {
      if (err.code === -2017) return null;
      throw err;
    });
  futuresAccount = () => this.futures('GET', '/account');

  openOrders(m) {
    return m.kind === 'spot'
      ? this.spot('GET', '/openOrders', { symbol: m.symbol })
      : this.futures('GET', '/openOrders', { contractName: m.symbol });
  }

  myTrades(m, limit = 30) {
    return m.kind === 'spot'
      ? this.spot('GET', '/myTrades', { symbol: m.symbol, limit })
      : this.futures('GET', '/myTrades', { contractName: m.symbol, limit });
  }

  order(m, orderId) {
    return m.kind === 'spot'
      ? this.spot('GET', '/order', { symbol: m.symbol, orderId })
      : this.futures('GET', '/order', { contractName: m.symbol, orderId });
  }

  // The spot account's orders on the pair, open and ended, newest first (docs/api.md, v3).
  spotOrderHistory = (m, limit = 30) =>
    this.call('/spot/open', 'GET', '/sapi/v3/historyOrders', { symbol: m.symbol, limit });

  futuresOrderHistory = (m, limit = 30) =>
    this.futures('POST', '/orderHistorical', { contractName: m.symbol, limit });

  // order: {side, type, volume, price?, open?} (open: 'OPEN' | 'CLOSE', futures only)
  placeOrder(m, order) {
    const fields = { side: order.side, type: order.type, volume: order.volume };
    if (order.type === 'LIMIT') fields.price = order.price;
    if (m.kind === 'spot') return this.spot('POST', '/order', { symbol: m.symbol, ...fields });
    return this.futures('POST', '/order', { contractName: m.symbol, open: order.open, ...fields });
  }

  cancel(m, orderId) {
    return m.kind === 'spot'
      ? this.spot('POST', '/cancel', { symbol: m.symbol, orderId })
      : this.futures('POST', '/cancel', { contractName: m.symbol, orderId });
  }

  setLeverage = (m, nowLevel) =>
    this.futures('POST', '/edit_lever', { contractName: m.symbol, nowLevel });

  // The signed-in self-service account's own faucet and reset (no gateway prefix to leave out).
  faucet = () => this.call('', 'POST', `${SANDBOX}/faucet`, {});
  resetAccount = () => this.call('', 'POST', `${SANDBOX}/account/reset`, {});
}

// ------------------------------------------------------------------ admin API

export class AdminSession {
  // The admin token, in memory only.
  constructor(token) {
    this.token = token;
  }

  request(method, path, params) {
    // The agent header names this page in the admin audit trail.
    const headers = { Authorization: `Bearer ${this.token}`, 'X-Tradehall-Agent': 'operator-page' };
    if (method === 'GET') {
      const query = queryOf(params);
      return send('GET', `${ADMIN}${path}${query ? `?${query}` : ''}`, headers);
    }
    headers['Content-Type'] = 'application/json';
    return send(method, `${ADMIN}${path}`, headers, JSON.stringify(params || {}));
  }

  static async open(token) {
    const session = new AdminSession(token);
    await session.request('GET', '/status');
    return session;
  }
}

// ------------------------------------------------------------------ refreshing

// Calls load() now and then every `every` ms (a number, or a function giving it at each turn;
// at least 1000: polling never runs faster than once a second), passing what it returns to
// onData and failures to onError. Paused while the page is hidden or `paused()` is true (a
// stream delivers the same data). Returns a function that stops it; its `refresh()` loads
// again at once (after a user's action), never two loads at a time.
export function watch(load, onData, onError, every = 1000, paused = () => false) {
  let stopped = false;
  let timer = null;
  let running = false;
  let again = false;
  const period = () => Math.max(typeof every === 'function' ? every() : every, 1000);
  async function tick() {
    clearTimeout(timer);
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    if (!document.hidden && !paused()) {
      try {
        const data = await load();
        if (!stopped) onData(data);
      } catch (err) {
        if (!stopped) onError(err);
      }
    }
    running = false;
    if (stopped) return;
    if (again) {
      again = false;
      tick();
    } else {
      timer = setTimeout(tick, period());
    }
  }
  tick();
  const stop = () => {
    stopped = true;
    clearTimeout(timer);
  };
  stop.refresh = tick;
  return stop;
}
