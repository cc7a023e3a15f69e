// The depth chart: cumulative bid and ask quantity against price, drawn on a canvas.

const BID = '#26a69a';
const ASK = '#ef5350';
const MAX_REACH = 0.02; // of the price, each way

function cumulative(levels) {
  let total = 0;
  return levels.map(([price, qty]) => {
    total += Number(qty);
    return [Number(price), total];
  });
}

export function drawDepth(canvas, depth) {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth;
  const height = canvas.clientHeight;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  const ctx = canvas.getContext('2d');
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, height);
  let bids = cumulative(depth.bids);
  let asks = cumulative(depth.asks);
  if (bids.length || asks.length) {
    // About the mid (one side only: its best price), as far as the nearer side's last level
    // reaches and at most MAX_REACH of the price each way: orders far from the touch (anyone's
    // dust, on one side or both) must not squeeze everyone's book into a corner.
    const anchor = bids.length && asks.length ? (bids[0][0] + asks[0][0]) / 2 : (bids[0] ?? asks[0])[0];
    const reaches = [];
    if (bids.length) reaches.push(anchor - bids[bids.length - 1][0]);
    if (asks.length) reaches.push(asks[asks.length - 1][0] - anchor);
    const reach = Math.min(...reaches, anchor * MAX_REACH) * (1 + 1e-9);
    // (Each side's best level stays, however wide the spread.)
    bids = bids.filter(([p], i) => i === 0 || anchor - p <= reach);
    asks = asks.filter(([p], i) => i === 0 || p - anchor <= reach);
  }
  ctx.fillStyle = '#8a93a6';
  ctx.font = '11px system-ui, sans-serif';
  if (bids.length === 0 && asks.length === 0) {
    ctx.fillText('no orders on the book', 8, height / 2);
    return;
  }
  const prices = [...bids, ...asks].map(([p]) => p);
  let low = Math.min(...prices);
  let high = Math.max(...prices);
  if (high === low) {
    low -= 1;
    high += 1;
  }
  canvas.dataset.range = `${low} ${high}`;
  const top = Math.max(...[...bids, ...asks].map(([, q]) => q)) * 1.1;
  const pad = 18;
  const x = (p) => ((p - low) / (high - low)) * (width - 2) + 1;
  const y = (q) => height - pad - (q / top) * (height - pad - 4);

  function side(points, color, towardsLow) {
    if (points.length === 0) return;
    ctx.beginPath();
    ctx.moveTo(x(points[0][0]), y(0));
    let before = 0;
    for (const [p, q] of points) {
      ctx.lineTo(x(p), y(before)); // a step: the total changes at each level's price
      ctx.lineTo(x(p), y(q));
      before = q;
    }
    const edge = towardsLow ? low : high;
    ctx.lineTo(x(edge), y(points[points.length - 1][1]));
    ctx.lineTo(x(edge), y(0));
    ctx.closePath();
    ctx.globalAlpha = 0.25;
    ctx.fillStyle = color;
    ctx.fill();
    ctx.globalAlpha = 1;
    ctx.strokeStyle = color;
    ctx.stroke();
  }
  side(bids, BID, true);
  side(asks, ASK, false);
  ctx.fillStyle = '#8a93a6';
  ctx.fillText(String(low), 4, height - 4);
  const label = String(high);
  ctx.fillText(label, width - ctx.measureText(label).width - 4, height - 4);
}
