// Conversations: the list with the common filters, and the time left in each official window.
import { useState } from "preact/hooks";
import { api, call, type Schemas } from "./api";
import { useLive } from "./live";
import { minutesText } from "./time";
import { Badge, Empty, Failure, Field, Loading, NotPermitted, Screen, When, type Loaded } from "./ui";

type Page = Schemas["ContactChannelPage"];
const statuses: Record<Schemas["ConversationStatusId"], string> = {
  1: "Open", 2: "Pending", 3: "In progress", 4: "Resolved", 5: "Cancelled", 6: "Spam", 7: "Banned",
};
const platforms: Partial<Record<Schemas["Platform"], string>> = { chatapp: "Chat app", ofc_chatapp: "Official" };

type Filters = { text: string; platform: "" | "chatapp" | "ofc_chatapp"; status: string; unread: boolean; window: boolean; closed: boolean; page: number };

export function Conversations() {
  const [f, setF] = useState<Filters>({ text: "", platform: "", status: "", unread: false, window: false, closed: false, page: 1 });
  const [list, setList] = useState<Loaded<Page>>({ state: "loading" });
  const load = async () => {
    const status = Number(f.status);
    const r = await call(api.GET("/api/contact-channels", {
      params: {
        query: {
          perPage: 20, page: f.page, orderBy: "last_message_at", orderMode: "desc",
          with: JSON.stringify(["providerOpenedWindow", "contact"]),
          ...(f.text.trim() !== "" ? { filter: f.text.trim() } : {}),
          ...(f.platform !== "" ? { channelable_type: f.platform } : {}),
          ...(status >= 1 && status <= 7 ? { status_ids: JSON.stringify([status]), include_closed: true } : {}),
          ...(f.unread ? { only_unread: true } : {}),
          ...(f.window ? { ofc_window_min_minutes: 1 } : {}),
          ...(f.closed && f.status === "" ? { show_all_statuses: true } : {}),
        },
      },
    }));
    if (r.ok) setList({ state: "ok", data: r.data });
    else if (r.status === 403) setList({ state: "denied" });
    else setList({ state: "failed", refusal: r });
  };
  useLive(load, [JSON.stringify(f)], 5000, [
    "omnichat.conversation.created",
    "omnichat.conversation.assigned",
    "omnichat.conversation.closed",
    "omnichat.message.received",
    "omnichat.message.sent",
  ]);
  const set = (p: Partial<Filters>) => setF({ ...f, page: 1, ...p });

  if (list.state === "denied") return <Screen title="Conversations"><NotPermitted what="conversations" /></Screen>;
  return (
    <Screen title="Conversations">
      <form class="filters" onSubmit={(e) => e.preventDefault()} aria-label="Filters">
        <Field label="Search"><input type="search" value={f.text} onInput={(e) => set({ text: e.currentTarget.value })} placeholder="name or number" /></Field>
        <Field label="Platform">
          <select value={f.platform} onChange={(e) => { const v = e.currentTarget.value; set({ platform: v === "chatapp" || v === "ofc_chatapp" ? v : "" }); }}>
            <option value="">All</option><option value="chatapp">Chat app</option><option value="ofc_chatapp">Official</option>
          </select>
        </Field>
        <Field label="Status">
          <select value={f.status} onChange={(e) => set({ status: e.currentTarget.value })}>
            <option value="">Not closed</option>
            {Object.entries(statuses).map(([id, name]) => <option key={id} value={id}>{name}</option>)}
          </select>
        </Field>
        <label class="check"><input type="checkbox" checked={f.unread} onChange={(e) => set({ unread: e.currentTarget.checked })} /> Unread only</label>
        <label class="check"><input type="checkbox" checked={f.window} onChange={(e) => set({ window: e.currentTarget.checked })} /> Official window open</label>
        <label class="check"><input type="checkbox" checked={f.closed} onChange={(e) => set({ closed: e.currentTarget.checked })} /> Include closed</label>
      </form>
      {list.state === "loading" && <Loading />}
      {list.state === "failed" && <Failure refusal={list.refusal} onRetry={() => void load()} />}
      {list.state === "ok" && list.data.data.length === 0 && <Empty>No conversation matches these filters.</Empty>}
      {list.state === "ok" && list.data.data.length > 0 && (
        <>
          <p class="muted">{list.data.total}{list.data.total_is_capped ? "+" : ""} conversation{list.data.total === 1 ? "" : "s"}</p>
          <ul class="cards" aria-label="Conversations">
            {list.data.data.map((c) => {
              const w = c.provider_opened_window;
              return (
                <li key={c.id} class="card" data-conversation={c.key}>
                  <h2>{c.name || c.key}{c.unread_count > 0 && <Badge tone="info">{c.unread_count} unread</Badge>}</h2>
                  <dl>
                    <dt>Number</dt><dd>{c.key}{c.is_group ? " (group)" : ""}</dd>
                    <dt>Platform</dt><dd>{platforms[c.platform] ?? c.channel_type}</dd>
                    <dt>Status</dt><dd>{statuses[c.status_id]}</dd>
                    <dt>Last message</dt><dd><When at={c.last_message_at} /></dd>
                    {c.platform === "ofc_chatapp" && (
                      <>
                        <dt>Window</dt>
                        <dd data-testid="window">{w && w.open
                          ? <><Badge tone="good">open</Badge> {minutesText(w.remaining_minutes)} left (until <When at={w.expires_at} />)</>
                          : <><Badge tone="warn">closed</Badge> only a template can be sent</>}</dd>
                      </>
                    )}
                  </dl>
                </li>
              );
            })}
          </ul>
          <nav class="pager" aria-label="Pages">
            <button type="button" disabled={f.page <= 1} onClick={() => setF({ ...f, page: f.page - 1 })}>Previous page</button>
            <span>Page {list.data.current_page} of {list.data.last_page}</span>
            <button type="button" disabled={f.page >= list.data.last_page} onClick={() => setF({ ...f, page: f.page + 1 })}>Next page</button>
          </nav>
        </>
      )}
    </Screen>
  );
}
