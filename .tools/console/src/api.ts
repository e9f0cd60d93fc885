// The console's only way to the gateway: the public API through openapi-fetch, typed by the client
// generated from openapi/openapi.yaml (build.sh writes gen/openapi.d.ts; tsc checks every call).
// The token lives in sessionStorage only: it goes with the tab, never into a URL or a cookie.
import createClient from "openapi-fetch";
import type { components, paths } from "../gen/openapi";

export type Schemas = components["schemas"];

const TOKEN_KEY = "gateway-console.token";

export const session = {
  token(): string | null {
    return sessionStorage.getItem(TOKEN_KEY);
  },
  signIn(token: string): void {
    sessionStorage.setItem(TOKEN_KEY, token);
  },
  signOut(): void {
    sessionStorage.removeItem(TOKEN_KEY);
  },
};

// Relative URLs: the console calls the origin that served it, and no other.
export const api = createClient<paths>({ baseUrl: location.origin, headers: { Accept: "application/json" } });
api.use({
  onRequest({ request }) {
    const token = session.token();
    if (token !== null) {
      request.headers.set("Authorization", `Bearer ${token}`);
    }
    return request;
  },
});

// A refusal as the console shows it: the status, the gateway's own words, and the wait it asked for.
export type Refusal = { status: number; message: string; retryAfter: number | null; details: string };
export type Outcome<T> = { ok: true; data: T } | ({ ok: false } & Refusal);

type Answer<T> = { data?: T; error?: unknown; response: Response };

// Listeners told when the gateway refuses the token itself (401), so the shell signs out.
const unauthenticated = new Set<() => void>();
export function onUnauthenticated(f: () => void): () => void {
  unauthenticated.add(f);
  return () => unauthenticated.delete(f);
}

function text(v: unknown, name: string): string {
  if (typeof v === "object" && v !== null && name in v) {
    const x: unknown = Object.getOwnPropertyDescriptor(v, name)?.value;
    return typeof x === "string" ? x : x === undefined ? "" : JSON.stringify(x);
  }
  return "";
}

// call awaits one operation and turns any answer, or no answer, into an Outcome.
export async function call<T>(request: Promise<Answer<T>>): Promise<Outcome<T>> {
  let r: Answer<T>;
  try {
    r = await request;
  } catch {
    return { ok: false, status: 0, message: "", retryAfter: null, details: "" };
  }
  if (r.response.ok && r.data !== undefined) {
    return { ok: true, data: r.data };
  }
  if (r.response.ok) {
    return { ok: false, status: r.response.status, message: "The gateway answered with no content.", retryAfter: null, details: "" };
  }
  const status = r.response.status;
  if (status === 401) {
    unauthenticated.forEach((f) => f());
  }
  const wait = Number(r.response.headers.get("Retry-After"));
  const err = r.error;
  let message = typeof err === "string" ? err : text(err, "message");
  const errors = text(err, "errors");
  if (errors !== "" && errors !== "{}") {
    message += " " + fieldErrors(err);
  }
  return { ok: false, status, message: message.trim(), retryAfter: Number.isFinite(wait) && wait > 0 ? wait : null, details: text(err, "details") };
}

function fieldErrors(err: unknown): string {
  if (typeof err !== "object" || err === null || !("errors" in err)) return "";
  const errors: unknown = err.errors;
  if (typeof errors !== "object" || errors === null) return "";
  return Object.entries(errors)
    .map(([field, msgs]) => `${field}: ${Array.isArray(msgs) ? msgs.join(" ") : String(msgs)}`)
    .join("; ");
}

// Where a refusal happened changes what it means: 409 on a send is the closed window, elsewhere a
// request still in progress.
export type Context = "send" | "general";

// plain says what a refusal means for the person, in words, with what to do next.
export function plain(r: Refusal, context: Context = "general"): string {
  const said = r.message !== "" ? ` The gateway said: “${r.message}”` : "";
  switch (r.status) {
    case 0:
      return "The gateway did not answer. Check that it is running and that your connection works, then try again.";
    case 400:
      if (context === "send") {
        return "The group did not take this message: the connection is not a member of the group, or the group lets only its administrators send and this number is not one. The message is stored as failed." + said;
      }
      return "The request was not understood." + said;
    case 401:
      return "The gateway does not accept this token (unknown, expired or revoked). Sign in with a valid token.";
    case 402:
      return "Your plan's message quota is used up, so nothing was sent. Upgrade the plan, or wait for the quota to renew, to send again." + said;
    case 403:
      return "Not permitted: this token lacks the permission for this action. Ask for a token that has it.";
    case 404:
      return "Not found: it may have been deleted meanwhile." + said;
    case 409:
      if (context === "send" && !/Idempotency-Key/i.test(r.message)) {
        return "The 24-hour window with this contact is closed: they have not written to this official number in the last 24 hours, so only an approved template can start the conversation. Nothing was sent or billed. Choose “Template” and send one.";
      }
      return "The same request is still being processed. Wait a moment and try again." + said;
    case 413:
      return "The file is too large for the gateway." + said;
    case 422:
      return "Some fields are not valid." + said;
    case 429: {
      const wait = r.retryAfter ?? 1;
      return `Too many requests for now. Wait ${wait} second${wait === 1 ? "" : "s"} and try again.`;
    }
    case 503:
      return "The gateway is temporarily unavailable." + (r.retryAfter !== null ? ` Try again in ${r.retryAfter} seconds.` : " Try again shortly.");
    case 509:
      return "The gateway refused this." + said + (r.details !== "" ? ` Provider's reason: ${r.details}` : "");
  }
  if (r.status >= 500) {
    return `The gateway failed (status ${r.status}). Try again; if it keeps failing, its logs say why.` + said;
  }
  return `The gateway answered ${r.status}.` + said;
}
