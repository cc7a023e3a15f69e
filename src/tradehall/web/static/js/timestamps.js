// A shared worker: one counter of signing timestamps for every tab of the page's origin.
// The server accepts a signature once, and two tabs signed in with the same key that sign the
// same request in the same millisecond would make the same signature; a timestamp taken here
// is never handed out twice. (A classic script: shared module workers are newer.)

let last = 0;

onconnect = (event) => {
  const port = event.ports[0];
  port.onmessage = ({ data }) => {
    last = Math.max(Number(data.wanted) || 0, last + 1);
    port.postMessage({ id: data.id, ts: last });
  };
};
