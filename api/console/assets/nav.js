// Page lifetime: what to stop when the page changes, and moving between pages.

const cleanup = [];
let renderer = () => {};

/** Register something to stop (a stream, a timer) when the page changes. */
export function onLeave(fn) {
  cleanup.push(fn);
}

export function leave() {
  for (const fn of cleanup.splice(0)) {
    try { fn(); } catch { /* one page's cleanup must not stop the next page */ }
  }
}

export function setRenderer(fn) {
  renderer = fn;
}

export function navigate(path) {
  history.pushState({}, "", path);
  renderer();
}

/** Run `fn` now and every `ms` until the page changes. */
export function every(ms, fn) {
  let stopped = false;
  let timer = null;
  const tick = async () => {
    if (stopped) return;
    try { await fn(); } catch { /* shown by the page; keep polling */ }
    if (!stopped) timer = setTimeout(tick, ms);
  };
  tick();
  onLeave(() => { stopped = true; clearTimeout(timer); });
}
