// The trader view: markets, chart, book, trades, depth; after sign-in, the account.
// Market data is live by the WebSocket streams and polled while they are down; the account
// panels are refreshed at once on a private stream's push, and polled slowly as a safety net.

import { market, Session, watch } from './api.js';
import { drawDepth } from './depth.js';
import { $, describeError, el, fillRows, formatTime, num, row, showMessage } from './dom.js';
import { offerSandbox, showSandboxActions } from './sandbox.js';
import { MARKET_PATHS, PRIVATE_PATHS, Stream, streamSymbol } from './stream.js';

const INTERVALS = ['1min', '5min', '15min', '1h', '1day'];
const STREAM_INTERVALS = {
  '1min': '1min', '5min': '5min', '15min': '15min', '1h': '60min', '1day': '1day',
};
const BOOK_LEVELS = 20;
const TRADES = 30;
const ACCOUNT_SAFETY_POLL_MS = 10000;
// The account panels are reloaded (after a push, or the user's own order or cancel) at most
// this often: a busy key pushes many a second, orders can be placed several a second, and
// every reload is a handful of signed requests against the key's rate limits.
const ACCOUNT_REFRESH_MS = 1000;
const STREAMS_WORK = 'WebSocket' in globalThis && 'DecompressionStream' in globalThis;

const state = {
  markets: [], // {kind, symbol, label, pricePrecision}
  tickers: new Map(), // symbol -> {last, rose}
  selected: null,
  interval: '1min',
  freshChart: true,
  session: null,
  stops: { market: [], account: [] },
  streams: { spot: null, futures: null }, // market data
  privateStreams: [],
  trades: [], // recent trades of the selected market, newest first
  lastBarTime: null, // the chart's newest bar (seconds), null until its history is loaded
  pendingCandle: null, // a pushed candle that came before the history
};

const fixed = (value, places) => Number(value).toFixed(places);
const marketLive = (m) => Boolean(state.streams[m.kind]?.live);
const accountLive = () => state.privateStreams.length > 0 && state.privateStreams.every((s) => s.live);

// ------------------------------------------------------------------ chart

const chart = LightweightCharts.createChart($('#chart'), {
  autoSize: true,
  layout: { background: { color: '#131722' }, textColor: '#c9d1e0', attributionLogo: false },
  grid: { vertLines: { color: '#1f2533' }, horzLines: { color: '#1f2533' } },
  timeScale: { timeVisible: true, secondsVisible: false },
  rightPriceScale: { scaleMargins: { top: 0.08, bottom: 0.25 } },
});
const candles = chart.addSeries(LightweightCharts.CandlestickSeries, {
  upColor: '#26a69a', downColor: '#ef5350', borderVisible: false,
  wickUpColor: '#26a69a', wickDownColor: '#ef5350',
});
const volumes = chart.addSeries(LightweightCharts.HistogramSeries, {
  priceFormat: { type: 'volume' }, priceScaleId: 'volume',
});
chart.priceScale('volume').applyOptions({ scaleMargins: { top: 0.8, bottom: 0 } });

const volumeColor = (bar) => (Number(bar.close) >= Number(bar.open)
  ? 'rgba(38,166,154,0.5)' : 'rgba(239,83,80,0.5)');

function showKlines(bars) {
  const candleData = bars.map((b) => ({
    time: Math.floor(b.idx / 1000),
    open: Number(b.open), high: Number(b.high), low: Number(b.low), close: Number(b.close),
  }));
  candles.setData(candleData);
  volumes.setData(bars.map((b, i) => ({
    time: candleData[i].time,
    value: Number(b.vol),
    color: volumeColor(b),
  })));
  $('#chart').dataset.bars = String(bars.length);
  state.lastBarTime = bars.length ? candleData[bars.length - 1].time : 0;
  if (state.freshChart && bars.length) {
    chart.timeScale().scrollToRealTime(); // a new market or interval opens on its latest bars
    state.freshChart = false;
  }
  if (state.pendingCandle) updateCandle(state.pendingCandle);
}

// A pushed candle (`id`: open time in seconds): the current one, or a new one after it.
function updateCandle(tick) {
  state.pendingCandle = state.lastBarTime === null ? tick : null;
  if (state.lastBarTime === null || tick.id < state.lastBarTime) return;
  candles.update({ time: tick.id, open: tick.open, high: tick.high, low: tick.low, close: tick.close });
  volumes.update({ time: tick.id, value: tick.vol, color: volumeColor(tick) });
  state.lastBarTime = tick.id;
  $('#chart').dataset.close = fixed(tick.close, state.selected.pricePrecision);
}

// ------------------------------------------------------------------ market list

async function loadMarkets() {
  const [symbols, contracts] = await Promise.all([market.symbols(), market.contracts()]);
  state.markets = [
    ...symbols.map((s) => ({
      kind: 'spot', symbol: s.symbol, label: `${s.baseAsset}/${s.quoteAsset}`, quote: s.quoteAsset,
      pricePrecision: s.pricePrecision, quantityPrecision: s.quantityPrecision,
    })),
    ...contracts.map((c) => ({
      kind: 'futures', symbol: c.symbol, label: c.symbol,
      pricePrecision: c.pricePrecision, quantityPrecision: 0,
      // Fees and P&L are in the margin coin: the quote (linear, side 1) or the base (inverse).
      marginCoin: c.symbol.split('-')[c.side === 1 ? 2 : 1],
    })),
  ];
}

async function loadTickers() {
  const spot = state.markets.filter((m) => m.kind === 'spot');
  const [spotTickers, futures] = await Promise.all([
    Promise.all(spot.map((m) => market.spotTicker(m.symbol))),
    state.markets.some((m) => m.kind === 'futures') ? market.futuresTickers() : [],
  ]);
  spot.forEach((m, i) => state.tickers.set(m.symbol, spotTickers[i]));
  for (const t of futures) state.tickers.set(t.contractName, t);
}

// A market's 24-hour ticker pushed by its stream, in the REST ticker's shape.
function onTicker(m, tick) {
  state.tickers.set(m.symbol, {
    last: fixed(tick.close, m.pricePrecision), high: fixed(tick.high, m.pricePrecision),
    low: fixed(tick.low, m.pricePrecision), vol: fixed(tick.vol, m.quantityPrecision),
    rose: fixed(tick.rose, 2),
  });
  // Pushes come in bursts (one per market): the list is drawn once per burst.
  clearTimeout(state.marketsTimer);
  state.marketsTimer = setTimeout(renderMarkets, 100);
}

function renderMarkets() {
  fillRows($('#markets tbody'), state.markets.map((m) => {
    const t = state.tickers.get(m.symbol);
    const rose = t ? Number(t.rose) : 0;
    const tr = row(
      el('td', {}, m.label, el('span', { class: 'tag' }, m.kind === 'futures' ? 'perp' : 'spot')),
      num(t ? t.last : ''),
      num(t ? `${rose > 0 ? '+' : ''}${t.rose}%` : '', rose > 0 ? 'up' : rose < 0 ? 'down' : ''),
    );
    tr.dataset.symbol = m.symbol;
    tr.classList.add('clickable');
    if (state.selected && state.selected.symbol === m.symbol) tr.classList.add('selected');
    tr.addEventListener('click', () => select(m));
    return tr;
  }));
  const t = state.selected && state.tickers.get(state.selected.symbol);
  $('#market-stats').textContent = t
    ? `last ${t.last}  24h ${Number(t.rose) > 0 ? '+' : ''}${t.rose}%  high ${t.high}  low ${t.low}  vol ${t.vol}`
    : '';
}

// ------------------------------------------------------------------ book, trades, depth

function bookRows(levels) {
  let total = 0;
  const withTotals = levels.slice(0, BOOK_LEVELS).map(([price, qty]) => {
    total += Number(qty);
    return { price, qty, total };
  });
  return { rows: withTotals, total };
}

function renderBook(depth) {
  const asks = bookRows(depth.asks);
  const bids = bookRows(depth.bids);
  const scale = Math.max(asks.total, bids.total) || 1;
  const line = (level, cls) => {
    const tr = row(num(level.price, cls), num(level.qty), num(level.total.toFixed(6).replace(/\.?0+$/, '')));
    tr.classList.add('level', cls);
    // The depth bar: a CSS custom property set through the CSSOM (allowed by the CSP).
    tr.style.setProperty('--depth', `${((level.total / scale) * 100).toFixed(1)}%`);
    return tr;
  };
  fillRows($('#asks'), asks.rows.map((l) => line(l, 'ask')).reverse(), 'no asks');
  fillRows($('#bids'), bids.rows.map((l) => line(l, 'bid')), 'no bids');
  const bestAsk = depth.asks.length ? Number(depth.asks[0][0]) : null;
  const bestBid = depth.bids.length ? Number(depth.bids[0][0]) : null;
  $('#spread').textContent = bestAsk !== null && bestBid !== null
    ? `spread ${(bestAsk - bestBid).toFixed(state.selected.pricePrecision)}`
    : '';
  // The levels the book shows (a stream's book is deeper): one far order must not set the scale.
  drawDepth($('#depth-chart'), {
    bids: depth.bids.slice(0, BOOK_LEVELS), asks: depth.asks.slice(0, BOOK_LEVELS),
  });
}

// Trades from a snapshot or a push (newest first) join the list; one already shown (the
// snapshot and a push can overlap) is not repeated.
function addTrades(fresh) {
  const key = (t) => `${t.time}|${t.price}|${t.qty}|${t.side}`;
  const seen = new Set(state.trades.map(key));
  state.trades = [...fresh.filter((t) => !seen.has(key(t))), ...state.trades]
    .sort((a, b) => b.time - a.time).slice(0, TRADES);
  renderTrades(state.trades);
}

// A stream trade in the REST shape.
const streamTrade = (m, t) => ({
  price: fixed(t.price, m.pricePrecision), qty: fixed(t.vol, m.quantityPrecision), time: t.ts, side: t.side,
});

function renderTrades(list) {
  const tbody = $('#trades tbody');
  if (list === null) {
    fillRows(tbody, [], 'the futures API publishes no trade list; your own trades are below');
    return;
  }
  fillRows(tbody, list.map((t) => row(
    num(t.price, t.side === 'BUY' ? 'up' : 'down'), num(t.qty), formatTime(t.time).slice(11),
  )), 'no trades yet');
}

// ------------------------------------------------------------------ selection and polling

// After an order or a cancel: the account and the book show it at once.
function refreshAccount() {
  for (const watcher of [...state.stops.account, ...state.stops.market]) watcher.refresh?.();
}

function stopAll(which) {
  for (const stop of state.stops[which]) stop();
  state.stops[which] = [];
}

function reportMarketError(err) {
  showMessage($('#page-message'), `Market data: ${describeError(err)}`, 'error');
}

function select(m) {
  state.selected = m;
  showMessage($('#page-message'), '');
  // The address names the market shown, so a reload or a shared link opens it again.
  history.replaceState(null, '', `?market=${encodeURIComponent(m.symbol)}`);
  state.freshChart = true;
  candles.applyOptions({
    priceFormat: { type: 'price', precision: m.pricePrecision, minMove: 10 ** -m.pricePrecision },
  });
  $('#market-title').textContent = m.kind === 'futures' ? `${m.label} perpetual` : m.label;
  document.body.dataset.kind = m.kind;
  updateOrderForm();
  renderMarkets();
  stopAll('market');
  Object.assign(state, { trades: [], lastBarTime: null, pendingCandle: null });
  // Polled while the market's stream is down (before it first connects, too).
  const streamed = () => marketLive(m);
  state.stops.market.push(
    watch(() => market.depth(m, BOOK_LEVELS), showBook, reportMarketError, 1000, streamed),
    watch(() => market.trades(m, TRADES), (list) => {
      state.trades = list || [];
      renderTrades(list);
    }, reportMarketError, 1000, streamed),
    watch(() => market.klines(m, state.interval), showKlines, reportMarketError, 2000, streamed),
  );
  followMarket(m);
  showFeed();
  if (state.session) watchAccount();
}

function showFeed() {
  $('#feed').textContent = marketLive(state.selected) ? 'live' : 'polling';
}

function showBook(depth) {
  // Market data is back: an error about it goes (a notice stays until another market is chosen).
  if ($('#page-message').classList.contains('error')) showMessage($('#page-message'), '');
  renderBook(depth);
}

// The selected market's book, trades and current candle by its stream; on every
// (re)subscription the trades and the chart's history are loaded once.
function followMarket(m) {
  const stream = state.streams[m.kind];
  if (!stream) return;
  const name = streamSymbol(m);
  const interval = state.interval;
  const current = () => state.selected === m && state.interval === interval;
  // Stream levels are [price, volume as a number]; the book shows the REST text.
  const levels = (side) => side.map(([price, vol]) => [price, fixed(vol, m.quantityPrecision)]);
  const book = (tick) => showBook({ bids: levels(tick.buys), asks: levels(tick.asks) });
  const tradesChannel = `market_${name}_trade_ticker`;
  const loadTrades = async () => {
    state.trades = [];
    const list = m.kind === 'spot'
      ? await market.trades(m, TRADES)
      : ((await stream.request(tradesChannel, { pageSize: TRADES })) || []).map((t) => streamTrade(m, t));
    if (current()) addTrades(list);
  };
  const loadHistory = async () => {
    const bars = await market.klines(m, interval);
    if (current()) showKlines(bars);
  };
  state.stops.market.push(
    stream.follow(`market_${name}_depth_step0`, book),
    stream.follow(tradesChannel, (tick) => addTrades(tick.data.map((t) => streamTrade(m, t))),
      () => loadTrades().catch(reportMarketError)),
    stream.follow(`market_${name}_kline_${STREAM_INTERVALS[interval]}`, updateCandle,
      () => loadHistory().catch(reportMarketError)),
  );
}

// One stream per kind of market, opened for the page's life; every market's ticker follows it.
function openMarketStreams() {
  if (!STREAMS_WORK) return;
  for (const kind of ['spot', 'futures']) {
    const markets = state.markets.filter((m) => m.kind === kind);
    if (!markets.length) continue;
    const stream = new Stream(MARKET_PATHS[kind], {
      onError: reportMarketError,
      onLive: (live) => {
        document.body.dataset[`${kind}Stream`] = live ? 'live' : 'polling';
        showFeed();
      },
    });
    for (const m of markets) stream.follow(`market_${streamSymbol(m)}_ticker`, (tick) => onTicker(m, tick));
    state.streams[kind] = stream;
  }
}

function renderIntervals() {
  $('#intervals').replaceChildren(...INTERVALS.map((interval) => el('button', {
    type: 'button',
    class: interval === state.interval ? 'active' : '',
    onclick: () => {
      state.interval = interval;
      renderIntervals();
      if (state.selected) select(state.selected);
    },
  }, interval)));
}

// ------------------------------------------------------------------ account

function renderOpenOrders(orders) {
  const m = state.selected;
  fillRows($('#open-orders tbody'), orders.map((o) => {
    const cancel = el('button', {
      type: 'button', class: 'small', dataset: { orderId: o.orderId },
      onclick: async (event) => {
        event.target.disabled = true;
        try {
          await state.session.cancel(m, o.orderId);
          showMessage($('#order-message'), `Order ${o.orderId} cancelled`, 'ok');
          refreshSoon();
        } catch (err) {
          showMessage($('#order-message'), `Cancel failed: ${describeError(err)}`, 'error');
          event.target.disabled = false;
        }
      },
    }, 'Cancel');
    const side = m.kind === 'futures' ? `${o.side} ${o.action}` : o.side;
    const tr = row(String(o.orderId), side, o.type, num(o.price), num(o.origQty), num(o.executedQty),
      formatTime(o.time ?? o.transactTime), el('td', {}, cancel));
    tr.dataset.orderId = String(o.orderId);
    return tr;
  }), 'no open orders');
}

// Most users have no margin account, and asking is then an error answer (-2017): the margin
// account of the pair is looked up when asked for, and followed only once it exists.
function showMarginButton(m) {
  const button = el('button', { type: 'button', class: 'small', id: 'margin-load' }, `Show ${m.symbol}`);
  button.addEventListener('click', async () => {
    button.disabled = true;
    try {
      const margin = await state.session.marginAccount(m.symbol);
      renderMargin(margin);
      if (margin) {
        state.stops.account.push(watch(() => state.session.marginAccount(m.symbol), renderMargin,
          reportAccountError, accountEvery(2000)));
      }
    } catch (err) {
      if (err.code === -1121) { // the pair has no margin trading (no public list says which do)
        $('#margin-symbol').textContent = '';
        fillRows($('#margin-balances tbody'), [], `no margin trading on ${m.symbol}`);
        return;
      }
      reportAccountError(err);
      button.disabled = false;
    }
  });
  $('#margin-symbol').replaceChildren(m.kind === 'spot' ? button : '');
  fillRows($('#margin-balances tbody'), [], m.kind === 'spot' ? 'not loaded' : 'select a spot pair');
  $('#margin-risk').textContent = '';
}

function renderMargin(margin) {
  $('#margin-symbol').textContent = margin ? margin.symbol : '';
  fillRows($('#margin-balances tbody'), margin ? margin.assets.map((a) => row(
    a.asset, num(a.free), num(a.locked), num(a.borrowed), num(a.interest),
  )) : [], state.selected.kind === 'spot' ? 'no margin account on this pair' : 'select a spot pair');
  $('#margin-risk').textContent = margin
    ? `risk ${margin.riskStatus}${margin.liquidationPrice ? `, liquidation price ${margin.liquidationPrice}` : ''}`
    : '';
}

function renderBalances(account, futures) {
  fillRows($('#spot-balances tbody'), account.balances
    .map((b) => row(b.asset, num(b.free), num(b.locked))));
  fillRows($('#futures-balances tbody'), futures.account.map((a) => row(
    a.marginCoin, num(a.accountNormal), num(a.accountLock), num(a.totalEquity), num(a.unrealizedAmount),
  )), 'no futures account');
  const positions = futures.account.flatMap((a) => a.positionVos.flatMap((g) => g.positions.map((p) => ({ ...p, contractName: g.contractName }))));
  fillRows($('#positions tbody'), positions.map((p) => {
    const pnl = Number(p.unRealizedAmount);
    return row(p.contractName, p.side, num(p.volume), num(p.openPrice), num(p.indexPrice),
      num(Number(p.reducePrice) > 0 ? p.reducePrice : '—'),
      num(p.unRealizedAmount, pnl > 0 ? 'up' : pnl < 0 ? 'down' : ''), num(p.holdAmount), num(`${p.leverageLevel}x`));
  }), 'no open positions');
}

function renderHistory(m, orders) {
  const spot = m.kind === 'spot';
  const statusNames = ['INIT', 'NEW', 'FILLED', 'PARTIALLY_FILLED', 'CANCELED', 'PENDING_CANCEL', 'EXPIRED'];
  const typeNames = ['', 'LIMIT', 'MARKET', 'IOC', 'FOK', 'POST_ONLY'];
  // A spot MARKET order has no price, and a MARKET BUY's quantity is the quote it spends.
  const spotQty = (o) => (o.type === 'MARKET' && o.side === 'BUY' ? `${o.origQty} ${m.quote}` : o.origQty);
  fillRows($('#order-history tbody'), orders.map((o) => (spot
    ? row(String(o.orderId), o.side, o.type, num(o.type === 'MARKET' ? 'market' : o.price), num(spotQty(o)),
      num(o.executedQty), o.status)
    : row(String(o.orderId), `${o.side} ${o.openOrClose}`, typeNames[o.type] || String(o.type),
      num(typeNames[o.type] === 'MARKET' ? 'market' : o.price),
      num(o.volume), num(o.dealVolume), statusNames[o.status] || String(o.status)))),
  'no orders');
}

function renderMyTrades(trades) {
  const coin = (t) => t.feeCoin ?? state.selected.marginCoin;
  fillRows($('#my-trades tbody'), trades.map((t) => row(
    String(t.id), t.side ?? (t.isBuyer ? 'BUY' : 'SELL'), num(t.price), num(t.qty),
    num(`${t.fee}${coin(t) ? ` ${coin(t)}` : ''}`), formatTime(t.time),
  )), 'no trades');
}

function reportAccountError(err) {
  if (err.code === -2015 && state.session) {
    // The key was revoked (or deleted) while signed in: every further request would be
    // refused too, so the page signs out instead of polling on.
    setSession(null);
    showMessage($('#signin-message'), `Signed out: the server no longer accepts this API key (${describeError(err)})`, 'error');
    return;
  }
  showMessage($('#account-message'), `Account: ${describeError(err)}`, 'error');
}

const accountFine = () => showMessage($('#account-message'), '');

function watchAccount() {
  stopAll('account');
  const m = state.selected;
  const s = state.session;
  showMarginButton(m);
  state.stops.account.push(
    watch(() => s.openOrders(m), (orders) => { accountFine(); renderOpenOrders(orders); },
      reportAccountError, accountEvery(1000)),
    watch(() => Promise.all([s.account(), s.futuresAccount()]),
      ([a, f]) => renderBalances(a, f), reportAccountError, accountEvery(2000)),
    watch(() => (m.kind === 'spot' ? s.spotOrderHistory(m) : s.futuresOrderHistory(m)),
      (orders) => renderHistory(m, orders), reportAccountError, accountEvery(2000)),
    watch(() => s.myTrades(m), renderMyTrades, reportAccountError, accountEvery(2000)),
  );
}

// While the private streams are live, the account polls only as a safety net.
const accountEvery = (ms) => () => (accountLive() ? ACCOUNT_SAFETY_POLL_MS : ms);

// The account's private streams (spot and margin; futures): each push refreshes the panels.
function openPrivateStreams(session) {
  for (const stream of state.privateStreams) stream.close();
  state.privateStreams = [];
  if (!session || !STREAMS_WORK) return;
  const onLive = () => {
    document.body.dataset.accountStream = accountLive() ? 'live' : 'polling';
  };
  state.privateStreams = Object.values(PRIVATE_PATHS).map((path) => new Stream(path, {
    hello: () => session.streamHello(path),
    onMessage: onAccountEvent,
    onError: reportAccountError,
    onLive,
  }));
}

function onAccountEvent(message) {
  if (!String(message.channel).startsWith('user_')) return;
  // One push per change, several per order: the panels are loaded once per burst.
  scheduleRefresh(50);
}

// A reload of the panels after `delay` ms, at most one per ACCOUNT_REFRESH_MS however many
// pushes and actions ask for one.
function scheduleRefresh(delay) {
  if (state.accountTimer) return;
  const wait = Math.max(delay, (state.accountRefreshed ?? 0) + ACCOUNT_REFRESH_MS - Date.now());
  state.accountTimer = setTimeout(() => {
    state.accountTimer = null;
    state.accountRefreshed = Date.now();
    refreshAccount();
  }, wait);
}

// After the user's own order, cancel or account action.
const refreshSoon = () => scheduleRefresh(0);

function setSession(session) {
  state.session = session;
  openPrivateStreams(session);
  $('#signin').hidden = Boolean(session);
  $('#signed-in').hidden = !session;
  $('#account').hidden = !session;
  $('#account-hint').hidden = Boolean(session);
  $('#order-submit').disabled = !session;
  showSandboxActions(session);
  if (session) {
    $('#signed-in-key').textContent = `key ${session.apiKey.slice(0, 8)}…`;
    watchAccount();
  } else {
    stopAll('account');
  }
}

$('#signin').addEventListener('submit', async (event) => {
  event.preventDefault();
  const apiKey = $('#api-key').value.trim();
  const secretInput = $('#api-secret');
  const secret = secretInput.value.trim();
  secretInput.value = ''; // the secret lives on only inside the CryptoKey
  showMessage($('#signin-message'), 'Signing in…');
  try {
    const session = await Session.open(apiKey, secret);
    showMessage($('#signin-message'), '');
    setSession(session);
  } catch (err) {
    const why = err.status === 401 || err.status === 403
      ? 'the API key or secret is wrong, or the key was revoked'
      : 'the server did not accept the sign-in';
    showMessage($('#signin-message'), `Sign-in failed: ${why} (${describeError(err)})`, 'error');
  }
});

$('#signout').addEventListener('click', () => {
  setSession(null);
  showMessage($('#signin-message'), 'Signed out', 'info');
});

$('#order-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  const m = state.selected;
  const order = {
    side: form.get('side'),
    type: form.get('type'),
    open: form.get('open'),
    volume: String(form.get('volume')).trim(),
    price: String(form.get('price')).trim(),
  };
  const button = $('#order-submit');
  button.disabled = true;
  try {
    const placed = await state.session.placeOrder(m, order);
    showMessage($('#order-message'), `Order ${placed.orderId} placed${placed.status ? ` (${placed.status})` : ''}`, 'ok');
    refreshSoon();
  } catch (err) {
    showMessage($('#order-message'), `Order refused: ${describeError(err)}`, 'error');
  } finally {
    button.disabled = !state.session;
  }
});

// The price field and the quantity's meaning follow the market, the type, side and action.
function updateOrderForm() {
  const form = new FormData($('#order-form'));
  const market = form.get('type') === 'MARKET';
  $('.price-field').hidden = market;
  const futures = state.selected && state.selected.kind === 'futures';
  $('#volume-label').textContent = market && form.get('side') === 'BUY' && !futures
    ? 'Amount to spend (quote)'
    : market && futures && form.get('open') === 'OPEN' ? 'Value (quote)' : futures ? 'Contracts' : 'Quantity';
}

$('#order-form').addEventListener('change', updateOrderForm);

$('#leverage-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  try {
    const answer = await state.session.setLeverage(state.selected, $('#leverage').value.trim());
    showMessage($('#order-message'), `Leverage on ${answer.contractName} is ${answer.nowLevel}x`, 'ok');
  } catch (err) {
    showMessage($('#order-message'), `Leverage not changed: ${describeError(err)}`, 'error');
  }
});

// ------------------------------------------------------------------ start

async function start() {
  setSession(null);
  offerSandbox({ setSession, session: () => state.session, refresh: refreshSoon });
  renderIntervals();
  try {
    await loadMarkets();
  } catch (err) {
    reportMarketError(err);
    return;
  }
  openMarketStreams();
  const wanted = (new URLSearchParams(location.search).get('market') || '').trim();
  const found = state.markets.find((m) => m.symbol.toUpperCase() === wanted.toUpperCase());
  select(found || state.markets[0]);
  if (wanted && !found) {
    showMessage($('#page-message'), `There is no market ${wanted} here: showing ${state.markets[0].symbol}`, 'info');
  }
  const allStreamed = () => state.markets.every((m) => marketLive(m));
  watch(loadTickers, renderMarkets, reportMarketError, 3000, allStreamed);
  document.body.dataset.ready = 'true';
}

start();
