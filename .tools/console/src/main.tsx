// The console's shell: sign-in, the navigation between screens (in the URL's fragment, so /console is
// the only page the gateway serves), and sign-out.
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, call, onUnauthenticated, plain, session } from "./api";
import { Connections } from "./connections";
import { forgetStream, useStreamState } from "./live";
import { Conversations } from "./conversations";
import { Official } from "./official";
import { Send } from "./send";
import { Webhooks } from "./webhooks";
import "./style.css";

const screens = [
  { path: "connections", label: "Connections" },
  { path: "official", label: "Official channels" },
  { path: "conversations", label: "Conversations" },
  { path: "send", label: "Send" },
  { path: "webhooks", label: "Webhooks" },
] as const;
type Path = (typeof screens)[number]["path"];

function current(): Path {
  const p = location.hash.replace(/^#\/?/, "");
  return screens.find((s) => s.path === p)?.path ?? "connections";
}

function SignIn({ onSignedIn, reason }: { onSignedIn: () => void; reason: string }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState(reason);
  const [busy, setBusy] = useState(false);
  useEffect(() => { document.title = "Sign in · Gateway console"; }, []);
  const submit = async (e: Event) => {
    e.preventDefault();
    const t = token.trim();
    if (t === "") {
      setError("Paste an access token first.");
      return;
    }
    setBusy(true);
    session.signIn(t);
    // A refusal of the stream belonged to the token before.
    forgetStream();
    // Any authenticated call tells a valid token from another; 403 means valid but without this
    // permission, which is still a token the console can use.
    const r = await call(api.GET("/api/channel-webhooks-available-events"));
    setBusy(false);
    if (!r.ok && (r.status === 401 || r.status === 0)) {
      session.signOut();
      setError(plain(r));
      return;
    }
    setToken("");
    onSignedIn();
  };
  return (
    <main id="main" class="signin">
      <h1>Gateway console</h1>
      <form onSubmit={(e) => void submit(e)} aria-describedby="signin-help">
        <p id="signin-help">Paste an access token of the gateway (the one you use as <code>Authorization: Bearer …</code>). It is kept in this tab only, and forgotten when you sign out or close the tab.</p>
        <label class="field">
          <span class="label">Access token</span>
          <input type="password" autoComplete="off" spellcheck={false} value={token}
            onInput={(e) => setToken(e.currentTarget.value)} name="token" required />
        </label>
        {error !== "" && <div class="notice error" role="alert"><p>{error}</p></div>}
        <button type="submit" class="primary" disabled={busy}>{busy ? "Checking…" : "Sign in"}</button>
      </form>
    </main>
  );
}

function Shell({ onSignOut }: { onSignOut: () => void }) {
  const [path, setPath] = useState<Path>(current());
  const live = useStreamState();
  useEffect(() => {
    const f = () => setPath(current());
    addEventListener("hashchange", f);
    return () => removeEventListener("hashchange", f);
  }, []);
  return (
    <>
      <a class="skip" href="#main" onClick={(e) => { e.preventDefault(); document.getElementById("screen-title")?.focus(); }}>Skip to content</a>
      <header class="top">
        <span class="brand">Gateway console</span>
        <nav aria-label="Screens">
          <ul>
            {screens.map((s) => (
              <li key={s.path}><a href={`#/${s.path}`} aria-current={s.path === path ? "page" : undefined}>{s.label}</a></li>
            ))}
          </ul>
        </nav>
        <span class="live" data-testid="live" data-state={live}
          title={live === "stream" ? "Updates arrive on the gateway's event stream" : "Updates are read every few seconds"}>
          {live === "stream" ? "Live" : "Polling"}
        </span>
        <button type="button" class="signout" onClick={onSignOut}>Sign out</button>
      </header>
      <main id="main" data-screen={path}>
        {path === "connections" && <Connections />}
        {path === "official" && <Official />}
        {path === "conversations" && <Conversations />}
        {path === "send" && <Send />}
        {path === "webhooks" && <Webhooks />}
      </main>
    </>
  );
}

function App() {
  const [signedIn, setSignedIn] = useState(session.token() !== null);
  const [reason, setReason] = useState("");
  useEffect(() => onUnauthenticated(() => {
    session.signOut();
    setReason("The gateway no longer accepts this token (expired or revoked). Sign in again.");
    setSignedIn(false);
  }), []);
  if (!signedIn) return <SignIn reason={reason} onSignedIn={() => { setReason(""); setSignedIn(true); }} />;
  return <Shell onSignOut={() => { session.signOut(); setReason(""); setSignedIn(false); }} />;
}

const root = document.getElementById("app");
if (root !== null) render(<App />, root);
