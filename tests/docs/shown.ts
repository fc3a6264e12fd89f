/**
 * Shown answers: what a page says a command prints, and whether the real output matches it.
 * `…` stands for any text (also across lines); everything else must be exactly as shown, apart
 * from trailing spaces of a line.
 */

/** Whether `actual` is `shown` with each `…` standing for any text. */
export function matches(shown: string, actual: string): boolean {
  const norm = (s: string) => s.replace(/[ \t]+$/gm, "").replace(/\n+$/, "");
  const pattern = norm(shown).split("…").map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
    .join("[\\s\\S]*?");
  return new RegExp(`^${pattern}$`).test(norm(actual));
}

/** An HTTP answer as `curl` (with or without `-i`) printed it. */
export interface HttpAnswer {
  status: number;
  /** Lower-cased names; only when curl printed them (`-i`). */
  headers: [string, string][];
  body: string;
}

/** What a page shows for a curl call: a status, maybe headers, maybe a body. */
export interface ShownHttp {
  status: number;
  headers: string[];
  body?: string;
}

/**
 * Reads the comment lines shown after a curl command: `201 {"id":"…"}` (the body continuing on the
 * next lines, each trimmed and joined with nothing between), or `HTTP/1.1 401 Unauthorized`
 * followed by `name: value` header lines and the body. Undefined when it is neither.
 */
export function parseShownHttp(lines: string[]): ShownHttp | undefined {
  const [first, ...rest] = lines.map((l) => l.trim());
  if (first === undefined) return undefined;
  const plain = /^(\d{3})(?:\s+(.*))?$/.exec(first);
  if (plain) {
    const body = [plain[2] ?? "", ...rest].join("");
    return { status: Number(plain[1]), headers: [], body: body || undefined };
  }
  const statusLine = /^HTTP\/[\d.]+\s+(\d{3})\b/.exec(first);
  if (!statusLine) return undefined;
  const headers: string[] = [];
  const body: string[] = [];
  for (const line of rest) {
    if (!body.length && /^[A-Za-z0-9-]+:\s/.test(line)) headers.push(line);
    else body.push(line);
  }
  return { status: Number(statusLine[1]), headers, body: body.join("") || undefined };
}

/** Splits what `curl -i` wrote into status, headers and body; plain output is all body. */
export function parseCurlOutput(out: string, status: number): HttpAnswer {
  if (!/^HTTP\/[\d.]+ \d{3}/.test(out)) return { status, headers: [], body: out };
  const end = out.search(/\r?\n\r?\n/);
  const head = end < 0 ? out : out.slice(0, end);
  const body = end < 0 ? "" : out.slice(end).replace(/^\r?\n\r?\n/, "");
  const headers = head.split(/\r?\n/).slice(1).map((line): [string, string] => {
    const colon = line.indexOf(":");
    return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()];
  });
  return { status, headers, body };
}

/** Why `answer` does not match `shown`, or undefined when it does. */
export function httpMismatch(shown: ShownHttp, answer: HttpAnswer): string | undefined {
  if (shown.status !== answer.status) {
    return `status ${answer.status}, shown ${shown.status}; body: ${answer.body}`;
  }
  for (const header of shown.headers) {
    const colon = header.indexOf(":");
    const name = header.slice(0, colon).trim().toLowerCase();
    const value = header.slice(colon + 1).trim();
    const got = answer.headers.filter(([n]) => n === name).map(([, v]) => v);
    if (!got.some((v) => matches(value, v))) {
      return `header ${name}: got ${JSON.stringify(got)}, shown ${JSON.stringify(value)}`;
    }
  }
  if (shown.body !== undefined && !matches(shown.body, answer.body)) {
    return `body:\n  real:  ${answer.body.trim()}\n  shown: ${shown.body}`;
  }
  return undefined;
}
