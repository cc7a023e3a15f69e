// Self-service accounts (docs/web.md): when the server offers them ([sandbox] self_service;
// it marks the page's body), "Create a test account" makes one, shows its key and secret once
// and signs the page in with them; "Faucet" and "Reset account" act on the signed-in account.

import { sandbox, Session } from './api.js';
import { $, describeError, showMessage } from './dom.js';

export const offered = () => document.body.dataset.selfService === 'on';

const amounts = (funds) => Object.entries(funds)
  .map(([asset, amount]) => `${amount.replace(/\.?0+$/, '')} ${asset}`).join(', ');

function report(text, kind = 'info') {
  showMessage($('#sandbox-message'), text, kind);
}

// The account panel's buttons follow the session (any key: the server refuses the faucet and
// the reset to an account it did not make for self-service, and says so).
export function showSandboxActions(session) {
  $('#sandbox-actions').hidden = !(offered() && session);
  $('#reset-confirm').hidden = true;
  if (!session) report('');
}

function showCredentials(account) {
  $('#new-api-key').value = account.apiKey;
  $('#new-api-secret').value = account.secret;
  const expiry = Math.round(account.keyExpirySeconds / 86400);
  $('#new-account-note').textContent = `Funded with ${amounts(account.spot)} in spot`
    + `${Object.keys(account.futures).length ? ` and ${amounts(account.futures)} in futures` : ''}.`
    + ` The faucet tops it up ${account.faucetPerDay} times a day; the key expires after`
    + ` ${expiry >= 1 ? `${expiry} day(s)` : `${account.keyExpirySeconds} s`} without a signed request.`;
  $('#new-account').hidden = false;
}

function forgetCredentials() {
  $('#new-api-key').value = '';
  $('#new-api-secret').value = '';
  $('#new-account').hidden = true;
}

async function copy(input, button) {
  try {
    await navigator.clipboard.writeText(input.value);
    button.textContent = 'Copied';
  } catch {
    input.select(); // no clipboard here (an insecure context): selected, ready to copy
    button.textContent = 'Selected: copy it';
  }
}

// setSession: signs the page in (or out); session: the page's current one; refresh: reloads
// the account panels.
export function offerSandbox({ setSession, session, refresh }) {
  if (!offered()) return;
  const create = $('#create-account');
  create.hidden = false;
  create.addEventListener('click', async () => {
    create.disabled = true;
    showMessage($('#signin-message'), 'Creating a test account…');
    try {
      const account = await sandbox.createAccount();
      showCredentials(account);
      setSession(await Session.open(account.apiKey, account.secret));
      showMessage($('#signin-message'), `Test account ${account.userId} created and signed in`, 'ok');
    } catch (err) {
      showMessage($('#signin-message'), `No test account: ${describeError(err)}`, 'error');
    } finally {
      create.disabled = false;
    }
  });
  $('#copy-api-key').addEventListener('click', (e) => copy($('#new-api-key'), e.target));
  $('#copy-api-secret').addEventListener('click', (e) => copy($('#new-api-secret'), e.target));
  $('#new-account-done').addEventListener('click', forgetCredentials);

  const act = async (button, action, done) => {
    button.disabled = true;
    try {
      report(done(await action(session())), 'ok');
      refresh();
    } catch (err) {
      report(describeError(err), 'error');
    } finally {
      button.disabled = false;
    }
  };
  $('#faucet').addEventListener('click', (e) => act(e.target, (s) => s.faucet(), (answer) => {
    const deposited = { ...answer.deposited.spot };
    for (const [coin, amount] of Object.entries(answer.deposited.futures)) {
      deposited[`${coin} (futures)`] = amount;
    }
    const left = `${answer.leftToday} top-up(s) left today`;
    return Object.keys(deposited).length
      ? `Faucet deposited ${amounts(deposited)}; ${left}`
      : `Nothing to top up: the balances are at their starting amounts; ${left}`;
  }));
  $('#reset-account').addEventListener('click', () => {
    $('#reset-confirm').hidden = false;
  });
  $('#reset-kept').addEventListener('click', () => {
    $('#reset-confirm').hidden = true;
  });
  $('#reset-confirmed').addEventListener('click', (e) => {
    $('#reset-confirm').hidden = true;
    // (A self-service reset closes no position: the server refuses while one is open.)
    act(e.target, (s) => s.resetAccount(), (answer) => `Account reset: ${answer.cancelledOrders}`
      + ' order(s) cancelled, balances back to the start');
  });
}
