// Live updates, in one module so the transport can change without touching the screens. Today the
// console polls: watch() calls load on an interval while the tab is visible. When the gateway has an
// event stream (GET /api/events/stream, with a short-lived ticket), watch() is where the console
// subscribes to it instead and calls load when a relevant event arrives; the screens stay as they are.
import { useEffect, useRef } from "preact/hooks";

export const POLL_MS = 2000;

// watch runs load now and then every `every` ms (never two at once, paused while the tab is hidden)
// until the returned stop is called.
export function watch(load: () => Promise<void>, every = POLL_MS): () => void {
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const tick = async (): Promise<void> => {
    if (stopped) return;
    if (!document.hidden) {
      try {
        await load();
      } catch {
        // load reports its own errors on the screen; the next tick tries again.
      }
    }
    if (!stopped) timer = setTimeout(() => void tick(), every);
  };
  void tick();
  return () => {
    stopped = true;
    if (timer !== undefined) clearTimeout(timer);
  };
}

// useLive keeps a component's data fresh: load runs now, on every change of deps, and then live.
export function useLive(load: () => Promise<void>, deps: unknown[], every = POLL_MS): void {
  const latest = useRef(load);
  latest.current = load;
  useEffect(() => watch(() => latest.current(), every), deps);
}
