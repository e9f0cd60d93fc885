// Live updates, in one module so the transport can change without touching the screens. A screen
// names the events that change what it shows; while the gateway's event stream is open
// (GET /api/events/stream, opened with a short-lived ticket so the token never goes into a URL), such
// an event reloads the screen at once and polling slows to a safety net. Without the stream (a token
// without channel_webhooks_view, a gateway that refuses it, a dropped connection being reopened) the
// screen polls at its own pace, as before.
import { useEffect, useRef, useState } from "preact/hooks";
import { api, call } from "./api";

export const POLL_MS = 2000;
// SAFETY_MS is the poll while the stream is open: it only catches what no event reports.
export const SAFETY_MS = 30000;
// A dropped stream is reopened with a fresh ticket after this wait, doubled up to REOPEN_MAX_MS.
const REOPEN_MS = 1000;
const REOPEN_MAX_MS = 30000;

// notify: one of events arrived; changed: the stream opened or dropped (reload, and poll at the pace
// that now applies).
type Listener = { events: Set<string>; notify: () => void; changed: () => void };

// Watchers of streamState (the shell's indicator).
const stateWatchers = new Set<() => void>();
function stateChanged(): void {
  for (const f of stateWatchers) f();
}

// stream is the one event stream of the tab, open while some screen listens.
const stream = {
  listeners: new Set<Listener>(),
  source: undefined as EventSource | undefined,
  open: false,
  // denied: the token may not read the stream (403); the tab polls until it signs in again.
  denied: false,
  wait: REOPEN_MS,
  timer: undefined as ReturnType<typeof setTimeout> | undefined,
  names: new Set<string>(),

  listen(l: Listener): () => void {
    this.listeners.add(l);
    this.follow(l.events);
    if (this.listeners.size === 1) void this.connect();
    return () => {
      this.listeners.delete(l);
      if (this.listeners.size === 0) this.close();
    };
  },

  // follow registers a handler for each event name once: EventSource dispatches named events
  // (the stream sends `event: <name>`) only to listeners of that name.
  follow(events: Set<string>): void {
    for (const name of events) {
      if (this.names.has(name)) continue;
      this.names.add(name);
      this.source?.addEventListener(name, () => this.dispatch(name));
    }
  },

  dispatch(name: string): void {
    for (const l of this.listeners) if (l.events.has(name)) l.notify();
  },

  async connect(): Promise<void> {
    if (this.source !== undefined || this.denied || this.listeners.size === 0) return;
    const r = await call(api.POST("/api/events/stream-tickets", {}));
    if (this.listeners.size === 0 || this.source !== undefined) return;
    if (!r.ok) {
      if (r.status === 403) this.denied = true;
      else this.reopenLater();
      return;
    }
    const source = new EventSource(`/api/events/stream?ticket=${encodeURIComponent(r.data.ticket)}`);
    this.source = source;
    for (const name of this.names) source.addEventListener(name, () => this.dispatch(name));
    source.onopen = () => {
      this.open = true;
      stateChanged();
      this.wait = REOPEN_MS;
      // What happened while the stream was closed is not replayed to the console: reload once.
      for (const l of this.listeners) l.changed();
    };
    // The browser would reopen with the same ticket, which expires; reopen with a new one instead.
    // A `stream.cut` (a reader too slow, a replica stopping) ends the connection the same way.
    source.onerror = () => this.drop();
    source.addEventListener("stream.cut", () => this.drop());
  },

  drop(): void {
    const was = this.open;
    this.close();
    this.reopenLater();
    if (was) for (const l of this.listeners) l.changed();
  },

  reopenLater(): void {
    if (this.listeners.size === 0 || this.timer !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.connect();
    }, this.wait);
    this.wait = Math.min(this.wait * 2, REOPEN_MAX_MS);
  },

  close(): void {
    this.source?.close();
    this.source = undefined;
    if (this.open) {
      this.open = false;
      stateChanged();
    }
    if (this.listeners.size === 0 && this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  },
};

// streamState is what the console shows about its live updates.
export function streamState(): "stream" | "polling" {
  return stream.open ? "stream" : "polling";
}

// useStreamState is streamState, kept current in a component.
export function useStreamState(): "stream" | "polling" {
  const [state, setState] = useState(streamState());
  useEffect(() => {
    const f = () => setState(streamState());
    stateWatchers.add(f);
    f();
    return () => {
      stateWatchers.delete(f);
    };
  }, []);
  return state;
}

// forgetStream ends the stream and its refusal, for signing out (the next token may read it).
export function forgetStream(): void {
  stream.close();
  stream.denied = false;
}

// watch runs load now, again whenever one of events arrives on the stream, and otherwise every
// `every` ms (SAFETY_MS while the stream is open): never two at once, paused while the tab is hidden,
// until the returned stop is called.
export function watch(load: () => Promise<void>, every = POLL_MS, events: string[] = []): () => void {
  let stopped = false;
  let running = false;
  let again = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const schedule = (): void => {
    if (timer !== undefined) clearTimeout(timer);
    const following = events.length > 0 && stream.open;
    timer = setTimeout(() => void tick(), following ? SAFETY_MS : every);
  };
  const tick = async (): Promise<void> => {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    if (!document.hidden) {
      try {
        await load();
      } catch {
        // load reports its own errors on the screen; the next tick tries again.
      }
    }
    running = false;
    if (stopped) return;
    if (again) {
      again = false;
      void tick();
      return;
    }
    schedule();
  };
  const off =
    events.length > 0
      ? stream.listen({ events: new Set(events), notify: () => void tick(), changed: () => void tick() })
      : () => {};
  void tick();
  return () => {
    stopped = true;
    off();
    if (timer !== undefined) clearTimeout(timer);
  };
}

// useLive keeps a component's data fresh: load runs now, on every change of deps, on each of events,
// and then by polling.
export function useLive(load: () => Promise<void>, deps: unknown[], every = POLL_MS, events: string[] = []): void {
  const latest = useRef(load);
  latest.current = load;
  useEffect(() => watch(() => latest.current(), every, events), deps);
}
