// Small shared pieces: times, notices, empty and error states, the confirmation dialog.
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { plain, type Context, type Refusal } from "./api";
import { localText, parseTime, utcText } from "./time";

export function When({ at, empty = "never" }: { at: string | null | undefined; empty?: string }) {
  if (at === null || at === undefined || at === "") return <span>{empty}</span>;
  const d = parseTime(at);
  if (d === null) return <span>{at}</span>;
  return <time dateTime={d.toISOString()} title={utcText(d)}>{localText(d)}</time>;
}

export function NotPermitted({ what }: { what: string }) {
  return (
    <div class="notice notpermitted" role="status" data-testid="not-permitted">
      <h2>Not permitted</h2>
      <p>This token does not have the permission to see {what}. Sign in with a token that has it, or ask whoever issued it.</p>
    </div>
  );
}

export function Failure({ refusal, context, onRetry }: { refusal: Refusal; context?: Context; onRetry?: () => void }) {
  return (
    <div class="notice error" role="alert">
      <p>{plain(refusal, context)}</p>
      {onRetry && <button type="button" onClick={onRetry}>Try again</button>}
    </div>
  );
}

export function Done({ children }: { children: ComponentChildren }) {
  return <div class="notice ok" role="status">{children}</div>;
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>;
}

export function Loading() {
  return <p class="loading" role="status">Loading…</p>;
}

// Loaded is the state of one list a screen shows.
export type Loaded<T> = { state: "loading" } | { state: "ok"; data: T } | { state: "denied" } | { state: "failed"; refusal: Refusal };

// Confirm asks before an action that loses something, naming what is lost. A native modal <dialog>:
// focus moves into it, Escape cancels, and the page behind cannot be reached until it closes.
export function Confirm({ title, children, action, onConfirm, onCancel }: {
  title: string; children: ComponentChildren; action: string; onConfirm: () => void; onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
    return () => d?.close();
  }, []);
  return (
    <dialog ref={ref} class="confirm" aria-labelledby="confirm-title" onCancel={(e) => { e.preventDefault(); onCancel(); }}>
      <h2 id="confirm-title">{title}</h2>
      <div>{children}</div>
      <div class="actions">
        <button type="button" onClick={onCancel} autoFocus>Cancel</button>
        <button type="button" class="danger" onClick={onConfirm}>{action}</button>
      </div>
    </dialog>
  );
}

// CopyButton copies text to the clipboard and says so.
export function CopyButton({ text, label = "Copy" }: { text: string; label?: string }) {
  const [said, setSaid] = useState("");
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setSaid("Copied.");
    } catch {
      setSaid("The browser did not allow copying: select the text and copy it by hand.");
    }
  };
  return (
    <span class="copy">
      <button type="button" onClick={() => void copy()}>{label}</button>
      <span role="status" class="said">{said}</span>
    </span>
  );
}

// Field is a labelled input row.
export function Field({ label, children, hint }: { label: string; children: ComponentChildren; hint?: string }) {
  return (
    <label class="field">
      <span class="label">{label}</span>
      {children}
      {hint && <span class="hint">{hint}</span>}
    </label>
  );
}

// Screen is the frame of every screen: its heading takes the focus when the screen opens, so a
// keyboard or screen-reader user starts there.
export function Screen({ title, children }: { title: string; children: ComponentChildren }) {
  const h = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    document.title = `${title} · Gateway console`;
    h.current?.focus();
  }, [title]);
  return (
    <section aria-labelledby="screen-title">
      <h1 id="screen-title" tabIndex={-1} ref={h}>{title}</h1>
      {children}
    </section>
  );
}

export function Badge({ tone, children }: { tone: "good" | "bad" | "warn" | "info"; children: ComponentChildren }) {
  return <span class={`badge ${tone}`}>{children}</span>;
}
