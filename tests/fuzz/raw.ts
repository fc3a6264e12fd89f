/**
 * Raw-socket cases for the fuzzer: HTTP/1.1 framing the broker's HTTP layer must refuse or survive
 * (bad request lines and versions, broken headers, Content-Length and chunked lies, pipelining,
 * truncation, bytes over 0x7f and NULs) and seeded byte mutations of valid requests. Only "no
 * 5xx, and the broker keeps serving" is asked of them. Idle connections are in fuzz_idle.ts.
 */

import { exchange } from "./http.ts";
import type { Keys } from "./inputs.ts";
import { Rand } from "./values.ts";

/** One framing case: bytes in parts, and what to expect back. */
export interface RawCase {
  name: string;
  parts: Uint8Array[];
  /** Methods in order, so HEAD answers are parsed without a body. */
  methods?: string[];
  /** How many answers to wait for at most (pipelining). */
  expect?: number;
  /** Shut the write side after sending: "followed by close". */
  closeWrite?: boolean;
  pauseMs?: number;
}

const enc = new TextEncoder();
const bytes = (...xs: (string | number[])[]) =>
  xs.map((x) => typeof x === "string" ? enc.encode(x) : new Uint8Array(x));

/** The fixed framing cases, with the admin key where a request needs one. */
export function framingCases(keys: Keys): RawCase[] {
  const A = `Authorization: Bearer ${keys.admin}\r\n`;
  const H = "Host: 127.0.0.1\r\n";
  const ok = `GET /healthz HTTP/1.1\r\n${H}\r\n`;
  const pub = (extra: string, body: string) =>
    `POST /publish/fz-raw HTTP/1.1\r\n${H}${A}${extra}\r\n${body}`;
  const textCase = (name: string, text: string, more: Partial<RawCase> = {}): RawCase => ({
    name,
    parts: [enc.encode(text)],
    expect: 1,
    ...more,
  });
  return [
    textCase("request line: method only", "GET\r\n\r\n"),
    textCase("request line: HTTP/0.9 style", "GET /healthz\r\n\r\n"),
    textCase("request line: extra token", `GET /healthz HTTP/1.1 extra\r\n${H}\r\n`),
    textCase("request line: leading space", ` GET /healthz HTTP/1.1\r\n${H}\r\n`),
    textCase("request line: double spaces", `GET  /healthz  HTTP/1.1\r\n${H}\r\n`),
    textCase("request line: tab separator", `GET\t/healthz\tHTTP/1.1\r\n${H}\r\n`),
    textCase("request line: leading CRLFs", `\r\n\r\n${ok}`),
    textCase("request line: relative target", `GET healthz HTTP/1.1\r\n${H}\r\n`),
    textCase("request line: asterisk target", `OPTIONS * HTTP/1.1\r\n${H}\r\n`),
    textCase("request line: absolute form", `GET http://evil.example/healthz HTTP/1.1\r\n${H}\r\n`),
    textCase("request line: authority form", `CONNECT 127.0.0.1:1 HTTP/1.1\r\n${H}\r\n`),
    textCase("request line: space in path", `GET /he lthz HTTP/1.1\r\n${H}\r\n`),
    textCase("request line: garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"),
    textCase("request line: 64 KiB method", `${"G".repeat(65536)} /healthz HTTP/1.1\r\n${H}\r\n`),
    ...["HTTP/2.0", "HTTP/0.9", "HTTP/1.2", "HTTP/9.9", "HTTP/1", "http/1.1", "HTTP/1.1x", "HTTP/"]
      .map((v) => textCase(`version ${v}`, `GET /healthz ${v}\r\n${H}\r\n`)),
    textCase("version HTTP/1.0 without Host", "GET /api/cluster/status HTTP/1.0\r\n" + A + "\r\n"),
    textCase("h2 prior-knowledge preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
    textCase(
      "h2c upgrade",
      `GET /healthz HTTP/1.1\r\n${H}Connection: Upgrade, HTTP2-Settings\r\n` +
        "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n",
    ),
    textCase(
      "websocket upgrade",
      `GET /consume/fz-raw HTTP/1.1\r\n${H}${A}Connection: Upgrade\r\n` +
        "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAA==\r\n\r\n",
    ),
    textCase("header without colon", `GET /healthz HTTP/1.1\r\n${H}foo\r\n\r\n`),
    textCase("header: space before colon", `GET /healthz HTTP/1.1\r\n${H}X-MQ-a : b\r\n\r\n`),
    textCase("header: empty name", `GET /healthz HTTP/1.1\r\n${H}: x\r\n\r\n`),
    textCase("header: obs-fold", pub("X-MQ-a: b\r\n folded\r\nContent-Length: 1\r\n", "x")),
    textCase("header: bare LF line ends", "GET /healthz HTTP/1.1\nHost: x\n\n"),
    textCase("header: bare CR", `GET /healthz HTTP/1.1\r\n${H}X-MQ-a: b\rc\r\n\r\n`),
    textCase(
      "header: 64 KiB value",
      `GET /healthz HTTP/1.1\r\n${H}X-A: ${"a".repeat(65536)}\r\n\r\n`,
    ),
    textCase(
      "header: 1 MiB value",
      `GET /healthz HTTP/1.1\r\n${H}X-A: ${"a".repeat(1 << 20)}\r\n\r\n`,
    ),
    textCase(
      "header: 1000 headers",
      `GET /healthz HTTP/1.1\r\n${H}${"X-H: v\r\n".repeat(1000)}\r\n`,
    ),
    textCase("uri: 8 KiB", `GET /healthz?${"a".repeat(8192)} HTTP/1.1\r\n${H}\r\n`),
    textCase("uri: 100 KiB", `GET /consume/${"a".repeat(102_400)} HTTP/1.1\r\n${H}${A}\r\n`),
    ...["abc", "-1", "1, 2", "+1", "0x1", "1e0", "99999999999999999999", " 1", "1 1", ""].map((v) =>
      textCase(`content-length ${JSON.stringify(v)}`, pub(`Content-Length: ${v}\r\n`, "x"))
    ),
    textCase(
      "content-length twice, different",
      pub("Content-Length: 1\r\nContent-Length: 2\r\n", "xy"),
    ),
    textCase("content-length twice, same", pub("Content-Length: 1\r\nContent-Length: 1\r\n", "x")),
    textCase(
      "content-length + chunked",
      pub("Content-Length: 3\r\nTransfer-Encoding: chunked\r\n", "1\r\nx\r\n0\r\n\r\n"),
    ),
    textCase(
      "transfer-encoding chunked, chunked",
      pub("Transfer-Encoding: chunked, chunked\r\n", "1\r\nx\r\n0\r\n\r\n"),
    ),
    textCase(
      "transfer-encoding xchunked",
      pub("Transfer-Encoding: xchunked\r\n", "1\r\nx\r\n0\r\n\r\n"),
    ),
    textCase("transfer-encoding gzip", pub("Transfer-Encoding: gzip\r\n", "x")),
    textCase(
      "transfer-encoding gzip, chunked",
      pub("Transfer-Encoding: gzip, chunked\r\n", "1\r\nx\r\n0\r\n\r\n"),
    ),
    ...[
      ["bad hex size", "zz\r\nx\r\n0\r\n\r\n"],
      ["missing CRLF after data", "1\r\nxy0\r\n\r\n"],
      ["size overflow", "ffffffffffffffffffff\r\nx\r\n0\r\n\r\n"],
      ["negative size", "-1\r\nx\r\n0\r\n\r\n"],
      ["extension and trailer", "1;a=b\r\nx\r\n0\r\nX-T: 1\r\n\r\n"],
      ["bare LF lines", "1\nx\n0\n\n"],
      ["no last chunk, then close", "1\r\nx\r\n"],
      ["size past the data, then close", "10\r\nx"],
    ].map(([n, body]) =>
      textCase(`chunked: ${n}`, pub("Transfer-Encoding: chunked\r\n", body!), { closeWrite: true })
    ),
    textCase("truncated body, then close", pub("Content-Length: 100\r\n", "0123456789"), {
      closeWrite: true,
    }),
    textCase("truncated headers, then close", `POST /publish/fz-raw HTTP/1.1\r\n${H}X-MQ-a: b`, {
      closeWrite: true,
    }),
    textCase("pipelined: 3 valid", ok.repeat(3), { expect: 3 }),
    textCase("pipelined: valid, bad, valid", `${ok}GET /healthz HTTP/7.7\r\n\r\n${ok}`, {
      expect: 3,
    }),
    textCase(
      "pipelined: publish, consume, ack garbage",
      pub("Content-Length: 2\r\n", "p1") +
        `GET /consume/fz-raw HTTP/1.1\r\n${H}${A}\r\n` +
        `POST /ack/fz-raw HTTP/1.1\r\n${H}${A}Content-Length: 7\r\n\r\n{"ids":`,
      { expect: 3 },
    ),
    textCase("pipelined: HEAD then GET", `HEAD /healthz HTTP/1.1\r\n${H}\r\n${ok}`, {
      expect: 2,
      methods: ["HEAD", "GET"],
    }),
    textCase("pipelined: 50 valid", ok.repeat(50), { expect: 50 }),
    textCase(
      "pipelined: body shorter than declared, then a request",
      pub("Content-Length: 5\r\n", `ab${ok}`),
      { expect: 2, closeWrite: true },
    ),
    textCase("expect 100-continue", pub("Expect: 100-continue\r\nContent-Length: 1\r\n", "x")),
    textCase(
      "expect 100-continue, body never sent",
      pub("Expect: 100-continue\r\nContent-Length: 9\r\n", ""),
      { closeWrite: true },
    ),
    {
      name: "bytes > 0x7f in path",
      parts: bytes("GET /publish/", [0xff, 0xfe], ` HTTP/1.1\r\n${H}\r\n`),
      expect: 1,
    },
    {
      name: "bytes > 0x7f in header name",
      parts: bytes(`GET /healthz HTTP/1.1\r\n${H}X-`, [0xe9], ": v\r\n\r\n"),
      expect: 1,
    },
    {
      name: "bytes > 0x7f in header value",
      parts: bytes(
        pub("Content-Length: 1\r\nX-MQ-a: ", "").slice(0, -2),
        [0xc3, 0x28, 0xff],
        "\r\n\r\nx",
      ),
      expect: 1,
    },
    {
      name: "NUL in path",
      parts: bytes("GET /consume/a", [0], `b HTTP/1.1\r\n${H}${A}\r\n`),
      expect: 1,
    },
    {
      name: "NUL in header value",
      parts: bytes(`GET /healthz HTTP/1.1\r\n${H}X-A: a`, [0], "b\r\n\r\n"),
      expect: 1,
    },
    {
      name: "NUL in method",
      parts: bytes("G", [0], `ET /healthz HTTP/1.1\r\n${H}\r\n`),
      expect: 1,
    },
    {
      name: "every byte value as a body",
      parts: bytes(pub("Content-Length: 256\r\n", ""), Array.from({ length: 256 }, (_, i) => i)),
      expect: 1,
    },
    {
      name: "slow client: request in three parts",
      parts: bytes("GET /heal", `thz HTTP/1.1\r\nHo`, "st: x\r\n\r\n"),
      pauseMs: 50,
      expect: 1,
    },
    { name: "half-sent request line, then close", parts: bytes("GET /heal"), closeWrite: true },
    { name: "connect and close", parts: [], closeWrite: true },
  ];
}

/** A valid request to mutate, as bytes. */
function seedRequest(r: Rand, keys: Keys): Uint8Array {
  const A = `Authorization: Bearer ${keys.admin}\r\n`;
  return enc.encode(r.pick([
    "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n",
    `POST /publish/fz-raw?priority=high HTTP/1.1\r\nHost: localhost\r\n${A}X-MQ-a: b\r\nContent-Length: 5\r\n\r\nhello`,
    `GET /consume/fz-raw?limit=2&visibility=1ms HTTP/1.1\r\nHost: localhost\r\n${A}\r\n`,
    `POST /api/topics HTTP/1.1\r\nHost: localhost\r\n${A}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n` +
    `d\r\n{"name":"fz-a\r\n2\r\n"}\r\n0\r\n\r\n`,
  ]));
}

/** A valid request with 1–4 seeded byte mutations (flip, delete, duplicate, insert, line ends). */
export function mutatedCase(r: Rand, keys: Keys, n: number): RawCase {
  let b = Array.from(seedRequest(r, keys));
  const ops: string[] = [];
  for (let k = 1 + r.int(4); k > 0; k--) {
    const at = r.int(b.length + 1);
    const len = 1 + r.int(8);
    const op = r.pick(["flip", "delete", "duplicate", "insert", "lf", "crlf", "truncate"]);
    ops.push(`${op}@${at}`);
    if (op === "flip") b[Math.min(at, b.length - 1)] = r.int(256);
    else if (op === "delete") b.splice(at, len);
    else if (op === "duplicate") b.splice(at, 0, ...b.slice(at, at + len));
    else if (op === "insert") b.splice(at, 0, ...r.bytes(len));
    else if (op === "lf") b = b.filter((x, i) => !(x === 13 && b[i + 1] === 10 && i >= at));
    else if (op === "crlf") b.splice(at, 0, 13, 10);
    else b = b.slice(0, at);
  }
  return { name: `mutation ${n}: ${ops.join(" ")}`, parts: [new Uint8Array(b)], closeWrite: true };
}

/** The fixed cases and `mutations` seeded mutations. */
export function rawCases(keys: Keys, seed: number, mutations: number): RawCase[] {
  const r = new Rand(seed ^ 0x5eed);
  const cases = framingCases(keys);
  for (let i = 0; i < mutations; i++) cases.push(mutatedCase(r, keys, i));
  return cases;
}

/** Sends one case on a fresh connection; the statuses of the answers that came back. */
export async function sendCase(port: number, c: RawCase): Promise<number[]> {
  const ex = await exchange(port, c.parts, {
    deadlineMs: 2_000,
    expect: c.expect,
    methods: c.methods,
    closeWrite: c.closeWrite,
    pauseMs: c.pauseMs,
  });
  return ex.responses.map((res) => res.status);
}
