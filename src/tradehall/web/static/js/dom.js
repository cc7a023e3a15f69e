// Small DOM helpers shared by both pages: elements built with text nodes only (never HTML
// strings), tables, status messages.

export const $ = (selector, root = document) => root.querySelector(selector);

// el('td', {class: 'num', dataset: {id: 3}}, 'text', child...)
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'class') node.className = value;
    else if (name === 'dataset') Object.assign(node.dataset, value);
    else if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Replaces a table body's rows; `empty` is shown in one cell when there are none.
export function fillRows(tbody, rows, empty = 'nothing yet') {
  if (rows.length === 0) {
    const columns = tbody.closest('table')?.querySelectorAll('thead th').length || 1;
    tbody.replaceChildren(el('tr', {}, el('td', { class: 'empty', colspan: columns }, empty)));
    return;
  }
  tbody.replaceChildren(...rows);
}

export function row(...cells) {
  return el('tr', {}, ...cells.map((c) => (c instanceof Node && c.tagName === 'TD' ? c : el('td', {}, c))));
}

export const num = (value, cls = '') => el('td', { class: `num ${cls}`.trim() }, value);

export function showMessage(node, text, kind = 'info') {
  node.textContent = text;
  node.className = `message ${kind}`;
  node.hidden = !text;
}

export function formatTime(ms) {
  const d = new Date(Number(ms));
  return Number.isFinite(d.getTime()) ? d.toISOString().replace('T', ' ').slice(0, 19) : '';
}

export function describeError(err) {
  if (err && typeof err.code === 'number' && err.code !== 0) return `${err.message} (code ${err.code})`;
  return err && err.message ? err.message : String(err);
}
