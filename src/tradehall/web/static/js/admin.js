// The operator view: read-only panels over the admin API, plus two explicit actions
// (deposit, revoke a key) that go through it too.

import { AdminSession, watch } from './api.js';
import { $, describeError, el, fillRows, formatTime, num, row, showMessage } from './dom.js';

// How long a "Revoke" click waits for its "Confirm revoke" (the key list refreshes meanwhile).
const CONFIRM_MS = 30000;

const state = {
  admin: null,
  stops: [],
  selectedUser: null,
  userNames: new Map(),
  keys: null,
  keysShown: '', // what the key table shows: it is rebuilt only when that changes
  pendingRevoke: null, // { apiKey, timer }: the key whose "Confirm revoke" is awaited
  pendingDeposit: null, // the deposit shown for confirmation
  contracts: null, // the futures contracts, read once a session
};

function kv(node, pairs) {
  node.replaceChildren(...pairs.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
}

function refreshAll() {
  for (const watcher of state.stops) watcher.refresh();
}

function stopAll() {
  for (const stop of state.stops) stop();
  state.stops = [];
}

function failed(err) {
  showMessage($('#token-message'), describeError(err), 'error');
}

function renderOverview([status, activity, system]) {
  showMessage($('#token-message'), '');
  $('#status-line').textContent = `version ${status.version} · ${status.writable ? 'writable' : 'WRITES STOPPED'}`;
  const facts = [
    ['Version', status.version],
    ['Users', String(status.users)],
    ['Open spot orders', String(status.openOrders)],
    ['Writable', status.writable ? 'yes' : `no: ${status.failure}`],
  ];
  const journal = status.journal;
  if (journal) {
    facts.push(['Journal', `record ${journal.head} · tables at ${journal.projected} (lag ${journal.lag})`]);
  }
  const ha = status.ha;
  if (ha) {
    facts.push(['Leader', `${ha.node} · epoch ${ha.epoch} · since ${formatTime(ha.since)}`]);
    facts.push(['Standbys', String(ha.standbys)]);
  }
  kv($('#status'), facts);
  $('#engines-panel').hidden = !ha;
  fillRows($('#engines tbody'), (ha?.engines ?? []).map((e) => row(
    e.node, e.role, num(String(e.epoch)), num(String(e.seq)), num(String(e.lag)),
    num(String(Math.round(e.seenMsAgo / 100) / 10)),
  )));
  kv($('#rates'), [
    ['Requests / s (last minute)', String(activity.requestsPerSecond)],
    ['Errors / s (last minute)', String(activity.errorsPerSecond)],
    ['Requests since start', String(activity.requestsTotal)],
    ['Errors since start', String(activity.errorsTotal)],
  ]);
  fillRows($('#markets-activity tbody'), activity.markets.map((m) => row(
    m.symbol, m.kind, num(String(m.openOrders)), num(m.kind === 'futures' ? String(m.triggers) : ''),
  )));
  const gateways = activity.gateways ?? [];
  $('#gateways-panel').hidden = gateways.length === 0;
  fillRows($('#gateways tbody'), gateways.map((g) => row(
    g.host, num(String(g.pid)), num(String(g.requestsPerSecond)), num(String(g.errorsPerSecond)),
    num(String(g.connections)), num(String(g.lastHeardSecondsAgo)),
  )));
  fillRows($('#errors tbody'), activity.recentErrors.map((e) => row(
    formatTime(e.time), e.source ?? '', num(String(e.count ?? 1)), `${e.method} ${e.path}`,
    num(String(e.status)), num(String(e.code)), e.msg,
  )), 'no errors since the server started');
  fillRows($('#system tbody'), system.accounts.flatMap((a) => a.balances.map((b) => row(
    a.account === 'fees' ? 'fee account' : a.account === 'pool' ? 'lending pool' : 'insurance fund',
    b.asset, num(b.free), num(b.locked),
  ))));
}

function renderAdminLog(log) {
  fillRows($('#admin-log tbody'), log.entries.map((e) => row(
    num(String(e.id)), formatTime(e.time), e.actor, e.agent, e.action,
    e.result === 'ok' ? 'ok' : `refused ${e.code}`, e.detail,
  )), 'no admin action recorded yet');
}

// Each contract's index and its sources, as the last index tick saw them.
async function loadIndexSources() {
  const a = state.admin;
  if (state.contracts === null) {
    state.contracts = (await a.request('GET', '/markets')).contracts.map((c) => c.symbol);
  }
  return Promise.all(state.contracts.map((contract) => a.request('GET', '/futures/index', { contract })));
}

function renderIndexSources(answers) {
  fillRows($('#index-sources tbody'), answers.flatMap((x) => x.sources.map((s) => row(
    x.contract, num(x.indexPrice ?? ''), num(x.markPrice ?? ''), s.name, num(String(s.weight)),
    num(s.value ?? ''), num(s.ageMs == null ? '' : `${Math.round(s.ageMs / 1000)} s`), s.status,
  ))), 'no futures contracts');
}

function renderSimulation(sim) {
  const injected = sim.faults.enabled
    ? Object.entries(sim.faults.injected).map(([kind, n]) => `${kind} ${n}`).join(', ')
    : 'off';
  kv($('#sim'), [
    ['Running', sim.running ? `yes, every ${sim.tickMs} ms (seed ${sim.seed})` : 'no'],
    ['Ticks', String(sim.ticks ?? 0)],
    ['Event-loop share', sim.busyShare == null ? '' : `${(sim.busyShare * 100).toFixed(2)} %`],
    ['Faults injected', injected],
  ]);
  fillRows($('#sim-participants tbody'), (sim.participants || []).map((p) => row(
    p.name, p.symbol, p.note ? `${p.state}: ${p.note}` : p.state,
    num(String(p.orders)), num(String(p.cancels)), num(String(p.rejected)),
  )), 'no participants: the simulation has not run on this server');
}

function renderAudit(audit) {
  const result = $('#audit-result');
  result.textContent = audit.ok ? 'OK: every invariant holds' : `${audit.problems.length} problem(s)`;
  result.className = audit.ok ? 'ok-text' : 'bad-text';
  $('#audit-problems').replaceChildren(...audit.problems.map((p) => el('li', {}, p)));
  fillRows($('#assets tbody'), audit.assets.map((a) => row(
    a.asset, num(a.held), num(a.depositsMinusWithdrawals), num(a.fees),
  )));
}

function renderUsers(users) {
  state.userNames = new Map(users.users.map((u) => [String(u.id), u.name]));
  fillRows($('#users tbody'), users.users.map((u) => row(
    num(String(u.id)), u.name, formatTime(u.created),
    el('td', {}, el('button', { type: 'button', class: 'small', onclick: () => selectUser(u.id) }, 'Balances')),
  )), 'no users');
}

// A self-service key's expiry moves with its every use.
const keyState = (k) => (k.revoked !== null ? `revoked ${formatTime(k.revoked)}`
  : k.expires ? `live, expires ${formatTime(k.expires)}` : 'live');

function renderKeys(keys) {
  state.keys = keys;
  const pending = state.pendingRevoke?.apiKey ?? null;
  // A busy testnet's expiries change every few seconds: they are updated in place, and the
  // rows rebuilt only when anything else changes.
  const shown = JSON.stringify([keys.keys.map(({ expires, ...rest }) => rest), pending]);
  if (shown === state.keysShown) {
    // Keep the rows (and the button under the operator's pointer) as they are.
    for (const k of keys.keys) {
      const cell = $(`#keys tr[data-api-key="${CSS.escape(k.apiKey)}"] td.key-state`);
      if (cell) cell.textContent = keyState(k);
    }
    return;
  }
  state.keysShown = shown;
  fillRows($('#keys tbody'), keys.keys.map((k) => {
    const asked = k.apiKey === pending;
    const action = k.revoked === null
      ? el('button', { type: 'button', class: 'small danger', dataset: { apiKey: k.apiKey }, onclick: () => revoke(k.apiKey) },
        asked ? 'Confirm revoke' : 'Revoke')
      : '';
    const tr = row(`${k.apiKey.slice(0, 12)}…`, num(String(k.userId)), k.readOnly ? 'read only' : 'trade',
      k.ips.length ? k.ips.join(', ') : 'any', el('td', { class: 'key-state' }, keyState(k)),
      el('td', {}, action));
    tr.dataset.apiKey = k.apiKey;
    return tr;
  }), 'no keys');
}

function showKeysAgain() {
  state.keysShown = '';
  if (state.keys) renderKeys(state.keys);
}

function forgetRevoke() {
  if (state.pendingRevoke) clearTimeout(state.pendingRevoke.timer);
  state.pendingRevoke = null;
}

// Two clicks: "Revoke" asks, "Confirm revoke" within CONFIRM_MS revokes. The question
// outlives the key list's refreshes; when it expires, the page says so.
function askRevoke(apiKey) {
  forgetRevoke();
  const short = `${apiKey.slice(0, 12)}…`;
  const timer = setTimeout(() => {
    state.pendingRevoke = null;
    showMessage($('#keys-message'), `Revoke of key ${short} not confirmed within ${CONFIRM_MS / 1000} s: the key is still live. Click "Revoke" again to revoke it.`, 'error');
    showKeysAgain();
  }, CONFIRM_MS);
  state.pendingRevoke = { apiKey, timer };
  // Not scrolled to: the clicked button itself now says "Confirm revoke".
  showMessage($('#keys-message'), `Click "Confirm revoke" within ${CONFIRM_MS / 1000} s to revoke key ${short}`, 'info');
  showKeysAgain();
}

async function revoke(apiKey) {
  if (state.pendingRevoke?.apiKey !== apiKey) {
    askRevoke(apiKey);
    return;
  }
  forgetRevoke();
  const button = $(`#keys tr[data-api-key="${CSS.escape(apiKey)}"] button`);
  if (button) button.disabled = true;
  try {
    await state.admin.request('POST', '/keys/revoke', { apiKey });
    tell($('#keys-message'), `Key ${apiKey.slice(0, 12)}… revoked`, 'ok');
  } catch (err) {
    tell($('#keys-message'), `Revoke failed: ${describeError(err)}`, 'error');
  }
  showKeysAgain();
  refreshAll();
}

async function loadUserBalances() {
  if (state.selectedUser === null) return null;
  return state.admin.request('GET', '/balances', { userId: state.selectedUser });
}

function renderUserBalances(answer) {
  if (!answer) return;
  $('#balances-user').textContent = `user ${answer.userId}`;
  fillRows($('#user-balances tbody'), answer.balances.map((b) => row(b.asset, num(b.free), num(b.locked))));
}

function selectUser(id) {
  state.selectedUser = id;
  $('#deposit-user').value = String(id);
  return loadUserBalances().then(renderUserBalances, failed);
}

// An action's outcome, shown beside its form and scrolled into sight (the page is long).
function tell(node, text, kind) {
  showMessage(node, text, kind);
  if (text) node.scrollIntoView({ block: 'nearest' });
}

function hideDeposit() {
  state.pendingDeposit = null;
  $('#deposit-confirm').hidden = true;
}

// A deposit takes two steps: the form shows what it would do, "Confirm deposit" does it.
$('#deposit-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  const deposit = {
    userId: String(form.get('userId')).trim(),
    asset: String(form.get('asset')).trim().toUpperCase(),
    amount: String(form.get('amount')).trim(),
  };
  const name = state.userNames.get(deposit.userId);
  state.pendingDeposit = deposit;
  $('#deposit-summary').textContent = `Deposit ${deposit.amount} ${deposit.asset} to user ${deposit.userId}${name ? ` (${name})` : ' (not among the users listed)'}?`;
  $('#deposit-confirm').hidden = false;
  showMessage($('#deposit-message'), '');
});

// Editing the form withdraws the question: only what was shown can be confirmed.
$('#deposit-form').addEventListener('input', hideDeposit);

$('#deposit-no').addEventListener('click', () => {
  hideDeposit();
  tell($('#deposit-message'), 'Deposit cancelled: nothing was deposited', 'info');
});

$('#deposit-yes').addEventListener('click', async () => {
  const deposit = state.pendingDeposit;
  if (!deposit) return;
  hideDeposit();
  const body = { ...deposit, txId: `web-${Date.now()}-${crypto.getRandomValues(new Uint32Array(1))[0]}` };
  const button = $('#deposit-form button');
  button.disabled = true;
  try {
    const done = await state.admin.request('POST', '/deposit', body);
    $('#deposit-amount').value = ''; // another deposit is typed, not one click away
    await selectUser(done.userId); // (the balances above the form grow: then the message shows)
    tell($('#deposit-message'), `Deposited ${done.amount} ${done.asset} to user ${done.userId} (tx ${done.txId}); free now ${done.free}`, 'ok');
    refreshAll();
  } catch (err) {
    tell($('#deposit-message'), `Deposit refused: ${describeError(err)}`, 'error');
  } finally {
    button.disabled = false;
  }
});

function open(session) {
  state.admin = session;
  $('#token-form').hidden = true;
  $('#opened').hidden = false;
  $('#admin').hidden = false;
  const a = session;
  state.stops.push(
    watch(() => Promise.all([a.request('GET', '/status'), a.request('GET', '/activity'), a.request('GET', '/system')]),
      renderOverview, failed, 2000),
    watch(() => a.request('GET', '/users'), renderUsers, failed, 3000),
    watch(() => a.request('GET', '/sim'), renderSimulation, failed, 3000),
    watch(() => a.request('GET', '/keys'), renderKeys, failed, 3000),
    watch(() => a.request('GET', '/admin-log', { limit: 50 }), renderAdminLog, failed, 3000),
    watch(loadIndexSources, renderIndexSources, failed, 3000),
    watch(loadUserBalances, renderUserBalances, failed, 3000),
    // The audit also reads the whole ledger from the store: every 10 s is plenty.
    watch(() => a.request('GET', '/audit'), renderAudit, failed, 10000),
  );
}

function close() {
  stopAll();
  forgetRevoke();
  hideDeposit();
  showMessage($('#deposit-message'), '');
  showMessage($('#keys-message'), '');
  state.admin = null;
  state.keys = null;
  state.keysShown = '';
  state.contracts = null;
  $('#token-form').hidden = false;
  $('#opened').hidden = true;
  $('#admin').hidden = true;
  $('#status-line').textContent = '';
}

$('#token-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const input = $('#admin-token');
  const token = input.value.trim();
  input.value = '';
  try {
    open(await AdminSession.open(token));
    showMessage($('#token-message'), '');
  } catch (err) {
    const why = err.status === 401 ? 'the admin token is wrong' : err.status === 403 ? 'this address may not use the admin API' : 'the server refused';
    showMessage($('#token-message'), `Not opened: ${why} (${describeError(err)})`, 'error');
  }
});

$('#close').addEventListener('click', close);
document.body.dataset.ready = 'true';
