// Times: the gateway's management timestamps are `YYYY-MM-DD HH:MM:SS` in UTC (its default time zone);
// other fields are ISO 8601 with an offset. The console shows them in the browser's zone, with the
// UTC time in the title (on hover and to assistive technology through the <time> element).
export function parseTime(s: string): Date | null {
  const management = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})$/.exec(s);
  const d = new Date(management ? `${management[1]}T${management[2]}Z` : s);
  return Number.isNaN(d.getTime()) ? null : d;
}

const local = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

export function localText(d: Date): string {
  return local.format(d);
}

export function utcText(d: Date): string {
  return d.toISOString().replace("T", " ").replace(/\.\d{3}Z$/, " UTC");
}

// span says how long until (or since) d, in words: "in 3 h 12 min", "2 min ago".
export function span(d: Date, now = Date.now()): string {
  const ms = d.getTime() - now;
  const mins = Math.round(Math.abs(ms) / 60000);
  let t: string;
  if (mins < 1) t = `${Math.max(0, Math.round(Math.abs(ms) / 1000))} s`;
  else if (mins < 60) t = `${mins} min`;
  else if (mins < 60 * 96) t = `${Math.floor(mins / 60)} h ${mins % 60} min`;
  else t = `${Math.floor(mins / 1440)} days ${Math.floor((mins % 1440) / 60)} h`;
  return ms >= 0 ? `in ${t}` : `${t} ago`;
}

export function minutesText(m: number): string {
  if (m < 60) return `${m} min`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}
