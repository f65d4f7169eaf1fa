// Refreshing a list the API has no event stream for: again after `every()` milliseconds,
// never while the tab is hidden, and at once when it is shown again.

export function poller(refresh, every) {
  let timer = null;
  let stopped = false;

  async function tick() {
    clearTimeout(timer);
    if (stopped) return;
    if (!document.hidden) {
      try {
        await refresh();
      } catch {
        // the view shows its own error; keep trying
      }
    }
    if (!stopped) timer = setTimeout(tick, every());
  }

  const onVisible = () => document.hidden || tick();
  document.addEventListener("visibilitychange", onVisible);
  tick();
  return {
    now: tick,
    stop() {
      stopped = true;
      clearTimeout(timer);
      document.removeEventListener("visibilitychange", onVisible);
    },
  };
}
