// The server's WebSocket streams (docs/websocket.md), the live alternative to `watch` polling:
// one reconnecting socket per stream path. Every server frame is gzip-compressed JSON (gunzipped
// with DecompressionStream), pings are answered, a closed socket is opened again with backoff
// and its channels subscribed again.

const RETRY_MS = [1000, 2000, 4000, 8000, 15000, 30000];

export const MARKET_PATHS = { spot: '/kline-api/ws', futures: '/futures/kline-api/ws' };
export const PRIVATE_PATHS = { spot: '/spotws_user/userData/ws', futures: '/position_order/ws' };

async function gunzipJson(data) {
  const gunzipped = new Blob([data]).stream().pipeThrough(new DecompressionStream('gzip'));
  return JSON.parse(await new Response(gunzipped).text());
}

export class Stream {
  // hello: async () => the first message (a private stream's signed sub), or null when none
  // is needed. The stream is `live` from the open (or the hello's acceptance) to the close;
  // onLive(true | false) tells each change. onMessage gets every other message, in order.
  constructor(path, { onMessage, onLive = () => {}, onError = () => {}, hello = null }) {
    Object.assign(this, { path, onMessage, onLive, onError, hello });
    this.live = false;
    this.stopped = false;
    this.failures = 0;
    this.socket = null;
    this.channels = new Map(); // channel -> {onTick, onSubscribed}
    this.requests = new Map(); // cb_id -> resolve, for `req`
    this.nextId = 1;
    this.inbox = Promise.resolve(); // frames are decoded one after the other, in arrival order
    this.connect();
  }

  connect() {
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    let socket;
    try {
      socket = new WebSocket(`${scheme}://${location.host}${this.path}`);
    } catch {
      // Refused at once (a policy forbids the address): the page keeps polling.
      this.stopped = true;
      return;
    }
    socket.binaryType = 'arraybuffer';
    this.socket = socket;
    socket.onopen = async () => {
      if (!this.hello) {
        this.setLive(true);
        return;
      }
      try {
        socket.send(JSON.stringify(await this.hello()));
      } catch (err) {
        this.onError(err);
      }
    };
    socket.onmessage = (event) => {
      this.inbox = this.inbox
        .then(() => gunzipJson(event.data))
        .then((message) => this.receive(socket, message))
        .catch((err) => this.onError(err));
    };
    socket.onclose = () => {
      if (this.socket !== socket) return;
      this.socket = null;
      this.setLive(false);
      if (this.stopped) return;
      const wait = RETRY_MS[Math.min(this.failures, RETRY_MS.length - 1)];
      this.failures += 1;
      this.retry = setTimeout(() => this.connect(), wait);
    };
  }

  receive(socket, message) {
    if (socket !== this.socket) return;
    if ('ping' in message) {
      socket.send(JSON.stringify({ pong: message.ping }));
    } else if (this.hello && !this.live && message.event_rep === 'subed' && message.channel === 'user') {
      this.setLive(true);
    } else if (message.event_rep === 'error') {
      this.answer(message.cb_id, null);
      // describeError adds the code, as for a REST refusal.
      this.onError(Object.assign(new Error(String(message.msg)), { code: Number(message.code) || 0 }));
    } else if (message.event_rep === 'rep' && this.requests.has(message.cb_id)) {
      this.answer(message.cb_id, message.data);
    } else if (message.tick && this.channels.has(message.channel)) {
      this.channels.get(message.channel).onTick(message.tick);
    } else if (this.onMessage) {
      this.onMessage(message);
    }
  }

  answer(id, data) {
    const resolve = this.requests.get(id);
    this.requests.delete(id);
    if (resolve) resolve(data);
  }

  setLive(live) {
    if (live) this.failures = 0;
    if (live === this.live) return;
    this.live = live;
    if (live) for (const channel of this.channels.keys()) this.subscribe(channel);
    else for (const id of [...this.requests.keys()]) this.answer(id, null);
    this.onLive(live);
  }

  send(message) {
    if (this.live) this.socket.send(JSON.stringify(message));
  }

  subscribe(channel) {
    this.send({ event: 'sub', params: { channel, cb_id: channel } });
    const followed = this.channels.get(channel);
    if (this.live && followed.onSubscribed) followed.onSubscribed();
  }

  // Pushes of `channel` go to onTick, now and after every reconnection; onSubscribed() is
  // called at each (re)subscription, to load what the pushes do not carry (history). Returns
  // a function that stops following.
  follow(channel, onTick, onSubscribed = null) {
    this.channels.set(channel, { onTick, onSubscribed });
    this.subscribe(channel);
    return () => {
      this.channels.delete(channel);
      this.send({ event: 'unsub', params: { channel, cb_id: channel } });
    };
  }

  // History (`req`): resolves with the answer's data, or null when the stream is not live.
  request(channel, params = {}) {
    if (!this.live) return Promise.resolve(null);
    const id = String(this.nextId++);
    return new Promise((resolve) => {
      this.requests.set(id, resolve);
      this.send({ event: 'req', params: { channel, cb_id: id, ...params } });
    });
  }

  close() {
    this.stopped = true;
    clearTimeout(this.retry);
    if (this.socket) this.socket.close(1000);
    this.socket = null;
    this.setLive(false);
  }
}

// The stream name of a market: BTCUSDT -> btcusdt, E-BTC-USDT -> e_btcusdt.
export function streamSymbol(m) {
  const lower = m.symbol.toLowerCase();
  return m.kind === 'spot' ? lower : lower.replace('-', '_').replaceAll('-', '');
}
