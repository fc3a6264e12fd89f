/**
 * Idle and half-sent connections for the fuzzer: opened at the start of a campaign and watched,
 * they must be closed by the server within a bound instead of being held forever (each one holds
 * a socket, and a client can open thousands).
 */

import type { Keys } from "./inputs.ts";

const enc = new TextEncoder();
const latin1 = new TextDecoder("latin1");

/** A connection opened and left idle or half-sent; the server should close it in time. */
export interface IdleProbe {
  name: string;
  openedAt: number;
  /** When the server closed it (EOF or reset); undefined while it is open. */
  closedAt?: number;
  /** What the server sent on it (the first 64 KiB), and when it began to. */
  received: string;
  answeredAt?: number;
  conn: Deno.TcpConn;
  /** Set once we close it ourselves. */
  closedByUs: boolean;
  /** The background reader; settles once the connection is closed by either side. */
  reader: Promise<void>;
}

/** The statuses a probe's connection was answered with. */
export function probeStatuses(p: IdleProbe): number[] {
  return [...p.received.matchAll(/HTTP\/1\.[01] (\d{3})/g)].map((m) => Number(m[1]));
}

/** What happened on a probe, for a finding: its name, and any answer it got and when. */
export function probeSummary(p: IdleProbe): string {
  if (p.answeredAt === undefined) return `${p.name} (no answer)`;
  const s = ((p.answeredAt - p.openedAt) / 1000).toFixed(1);
  return `${p.name} (answered ${probeStatuses(p).join(", ") || "bytes"} after ${s} s, left open)`;
}

/** Opens the idle and half-sent connections and watches them in the background. */
export async function openIdleProbes(port: number, keys: Keys): Promise<IdleProbe[]> {
  const A = `Authorization: Bearer ${keys.admin}\r\n`;
  const post = "POST /publish/fz-idle HTTP/1.1\r\nHost: localhost\r\n" + A;
  const kinds: [string, string][] = [
    ["idle: connected, nothing sent", ""],
    ["half-sent request line", "GET /heal"],
    ["headers without their blank line", "GET /healthz HTTP/1.1\r\nHost: localhost\r\n"],
    ["body short of its Content-Length", `${post}Content-Length: 10\r\n\r\nab`],
    ["chunked body never finished", `${post}Transfer-Encoding: chunked\r\n\r\n5\r\nab`],
    [
      "keep-alive connection idle after an answer",
      "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n",
    ],
  ];
  const probes: IdleProbe[] = [];
  for (const [name, text] of kinds) {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    if (text) await conn.write(enc.encode(text));
    const p: IdleProbe = {
      name,
      openedAt: Date.now(),
      received: "",
      conn,
      closedByUs: false,
      reader: Promise.resolve(),
    };
    p.reader = (async () => {
      const buf = new Uint8Array(16 * 1024);
      try {
        for (let n = await conn.read(buf); n !== null; n = await conn.read(buf)) {
          p.answeredAt ??= Date.now();
          if (p.received.length < 65536) p.received += latin1.decode(buf.subarray(0, n));
        }
      } catch { /* reset by the server, or closed by us */ }
      if (!p.closedByUs) p.closedAt = Date.now();
    })();
    probes.push(p);
  }
  return probes;
}

/** Closes what the server left open and waits for the readers to finish. */
export async function closeIdleProbes(probes: IdleProbe[]): Promise<void> {
  for (const p of probes) {
    if (p.closedAt !== undefined) continue;
    p.closedByUs = true;
    try {
      p.conn.close();
    } catch { /* closed meanwhile */ }
  }
  await Promise.all(probes.map((p) => p.reader));
}
