/**
 * The command table: every `ferry` command with its arguments and flags (docs/cli.md
 * tool"), parsed by commander. Flag values are checked here, before anything is sent: a bad
 * duration, limit or header is a usage error (exit 2), as is an unknown command or flag.
 */

import { Command, CommanderError, InvalidArgumentError, Option } from "commander";
import { Ferry, FerryUsageError } from "../clients/ts/mod.ts";
import { readDuration } from "../protocol/duration.ts";
import cliConfig from "./deno.json" with { type: "json" };
import * as admin from "./commands/admin.ts";
import * as messages from "./commands/consume.ts";
import { publish, type PublishFlags } from "./commands/publish.ts";
import { tail } from "./commands/tail.ts";
import { hashKey } from "./commands/key.ts";
import * as webhooks from "./commands/webhooks.ts";
import type { Ctx } from "./context.ts";
import { explain } from "./explain.ts";
import { shown } from "./escape.ts";
import { EXIT, oneLine, usage } from "./failure.ts";
import { Output, StdoutClosed } from "./output.ts";
import { DEFAULT_URL, type Env, processEnv, resolveSettings } from "./settings.ts";

/** Requests other than long-polls and streams give up after this long (the client's default). */
const REQUEST_TIMEOUT_MS = 60_000;
/** Commands that run until Ctrl-C, or wait: Ctrl-C ends them (exit 0; 130 for a wait cut short). */
const LONG_RUNNING = new Set(["tail", "consume"]);
/** The longest consume --limit the broker takes. */
const MAX_LIMIT = 1000;

const HELP_AFTER = `
Settings: --url, else FERRY_URL, else ${DEFAULT_URL}; --api-key, else FERRY_API_KEY;
--cacert, else FERRY_CACERT.
With --json every command prints one JSON document (tail and consume --follow: one JSON
object per line); notices and errors go to stderr.
Exit codes: 0 ok, 1 the broker refused (its reason on stderr), 2 usage error, 3 cannot connect,
130 Ctrl-C ended a wait.

Examples:
  ferry publish orders '{"sku":"a1"}' --header 'X-MQ-Trace: t-1'
  ferry publish orders -f a.json b.json      one message per file
  ferry publish orders --batch msgs.ndjson   one message per line: {"payload_text":"…"}
  ferry consume orders --wait 10s --limit 5
  ferry tail orders --filter sku=a1
  ferry --json topics | jq '.[].name'`;

/** Runs one `ferry` command line and answers its exit code; never throws. */
export async function run(argv: string[], env: Env = processEnv): Promise<number> {
  const stop = new AbortController();
  let url = DEFAULT_URL;
  /** A first Ctrl-C ends a long-running command cleanly; a second one, or any other, exits. */
  const onInterrupt = () => {
    if (stop.signal.aborted) Deno.exit(130);
    stop.abort();
  };
  let listening = false;
  try {
    const program = buildProgram((cmd) => {
      const flags = cmd.optsWithGlobals<
        { url?: string; apiKey?: string; json?: boolean; cacert?: string }
      >();
      const settings = resolveSettings(flags, env);
      url = settings.url;
      if (LONG_RUNNING.has(cmd.name())) {
        Deno.addSignalListener("SIGINT", onInterrupt);
        listening = true;
      }
      return {
        ferry: client(
          url,
          settings.apiKey,
          flags.apiKey !== undefined ? "--api-key" : "FERRY_API_KEY",
          settings.caFile,
        ),
        out: Output.forProcess(settings.json),
        settings,
        signal: stop.signal,
        cwd: env("INIT_CWD") || Deno.cwd(),
        stdinIsTerminal: Deno.stdin.isTerminal(),
        stderrIsTerminal: Deno.stderr.isTerminal(),
      };
    });
    await program.parseAsync(argv, { from: "user" });
    return EXIT.ok;
  } catch (e) {
    if (e instanceof StdoutClosed) return EXIT.ok;
    if (e instanceof CommanderError) {
      if (e.exitCode === 0) return EXIT.ok; // --help, --version
      console.error(`ferry: ${shown(usageLine(e))}`);
      return EXIT.usage;
    }
    const failure = explain(e, url);
    console.error(`ferry: ${shown(failure.message)}`);
    return failure.exitCode;
  } finally {
    if (listening) Deno.removeSignalListener("SIGINT", onInterrupt);
  }
}

/**
 * The client, or a usage error naming where an API key no header can carry came from, or a CA
 * file that cannot be used.
 */
function client(
  url: string,
  apiKey: string | undefined,
  source: string,
  caFile: { path: string; source: string } | undefined,
): Ferry {
  let fetchOptions: Record<string, unknown> | undefined;
  if (caFile) {
    let pem: string;
    try {
      pem = Deno.readTextFileSync(caFile.path);
    } catch (e) {
      throw usage(`Cannot read ${caFile.source} "${caFile.path}": ${(e as Error).message}`);
    }
    try {
      fetchOptions = { client: Deno.createHttpClient({ caCerts: [pem] }) };
    } catch (e) {
      const why = (e as Error).message;
      throw usage(`${caFile.source} "${caFile.path}" holds no usable PEM certificate: ${why}`);
    }
  }
  try {
    return new Ferry({ url, apiKey, timeoutMs: REQUEST_TIMEOUT_MS, fetchOptions });
  } catch (e) {
    if (e instanceof FerryUsageError) throw usage(`Invalid ${source}: ${e.reason}`);
    throw e;
  }
}

/** Commander's message on one line, with where to look for the right usage. */
function usageLine(e: CommanderError): string {
  const text = oneLine(e.message.replace(/^error: /, ""));
  if (e.code === "commander.help" || e.code === "commander.helpDisplayed") {
    return "Missing a command; see ferry --help";
  }
  return `${text}; see ferry --help`;
}

/** Builds a command's context from its parsed flags, once the command is known. */
type MakeCtx = (cmd: Command) => Ctx;

/** The whole command tree; `makeCtx` runs only once a command's arguments parsed cleanly. */
export function buildProgram(makeCtx: MakeCtx): Command {
  /** An action: the command's positional arguments and flags, with its context first. */
  const go =
    <A extends unknown[]>(fn: (ctx: Ctx, ...args: A) => Promise<void>) =>
    async (...args: unknown[]) => {
      const cmd = args.at(-1) as Command;
      await fn(makeCtx(cmd), ...args.slice(0, -1) as A);
    };

  const program = new Command("ferry")
    .usage("[--url URL] [--api-key KEY] [--json] <command>")
    .description("Publish, consume and operate a Ferry message broker")
    .version(cliConfig.version, "-V, --version")
    .option("--url <url>", `broker address (env FERRY_URL, default ${DEFAULT_URL})`)
    .option("--api-key <key>", "API key (env FERRY_API_KEY)")
    .option("--cacert <file>", "PEM file of a CA to trust for https:// (env FERRY_CACERT)")
    .option("--json", "print JSON for scripts instead of text")
    .exitOverride()
    .configureOutput({
      // run() prints the one line of a usage error; commander neither prints it nor the help.
      outputError: () => {},
      writeErr: () => {},
      // Plain help: commander would otherwise read FORCE_COLOR and friends from the environment.
      getOutHasColors: () => false,
      getErrHasColors: () => false,
    })
    .addHelpText("after", HELP_AFTER);

  program.command("publish <topic> [data]")
    .description("publish the data, each -f FILE, or stdin (-) as messages")
    .addOption(new Option("-f, --file <files...>", "publish each file as one message, in order"))
    .addOption(durationOption("--ttl <duration>", "drop the message unless consumed in time"))
    .addOption(durationOption("--delay <duration>", "hide the message this long"))
    .addOption(new Option("--priority <priority>").choices(["high", "normal", "low"]))
    .option("--key <key>", "idempotency key: a repeat within 5 minutes is not stored again")
    .option("--header <header>", "an X-MQ-* header to store, 'X-MQ-Name: value'", header, [])
    .option("--broadcast", "hand to the consumers waiting now; not stored")
    .option(
      "--batch <file>",
      "publish each line of an NDJSON file (- for stdin) as a message, 1,000 a request",
    )
    .action(
      go((ctx, topic: string, data: string | undefined, o: PublishFlags) =>
        publish(ctx, topic, data, o)
      ),
    );

  program.command("consume <topic>")
    .description("take messages, print them, then ack them")
    .option("--limit <n>", `messages to take at once, 1-${MAX_LIMIT}`, limit, 1)
    .option("--group <group>", "consume as this consumer group")
    .addOption(
      durationOption("--wait <duration>", "wait this long for a message").argParser(
        waitMs,
      ).default(0, "0s"),
    )
    .option("--no-ack", "leave them in flight: they come back after their lease")
    .option("--follow", "keep consuming until Ctrl-C")
    .action(go((ctx, topic: string, o: messages.ConsumeFlags) => messages.consume(ctx, topic, o)));

  program.command("ack <topic> <ids...>")
    .description("ack messages taken with --no-ack")
    .option("--group <group>", "the consumer group that took them")
    .action(
      go((ctx, topic: string, ids: string[], o: { group?: string }) =>
        messages.ack(ctx, topic, ids, o)
      ),
    );

  program.command("requeue <topic> <id>")
    .description("give a message back for another attempt (the 3rd goes to <topic>.dlq)")
    .option("--reason <text>", "why; kept on the message and shown in the DLQ")
    .addOption(durationOption("--delay <duration>", "hide it this long before it comes back"))
    .option("--group <group>", "the consumer group that took it")
    .action(
      go((ctx, topic: string, id: string, o: { reason?: string; group?: string }) =>
        messages.requeue(ctx, topic, id, o)
      ),
    );

  program.command("peek <topic>")
    .description("show up to 10 messages without taking them")
    .action(go((ctx, topic: string) => messages.peek(ctx, topic)));

  program.command("tail <topic>")
    .description("print every message stored in the topic as it arrives, until Ctrl-C")
    .option("--filter <key=value>", "only JSON payloads whose key has this value (or just key)")
    .action(go((ctx, topic: string, o: { filter?: string }) => tail(ctx, topic, o)));

  program.command("topics")
    .description("list the topics with their depth, in-flight and dead-letter counts")
    .action(go((ctx) => admin.topics(ctx)));

  const topic = program.command("topic").description("create, purge or delete a topic");
  topic.command("create <name>")
    .description("create a topic in advance")
    .addOption(
      new Option("--policy <policy>", "what a full topic does").choices(["reject", "drop-oldest"]),
    )
    .addOption(durationOption("--retain <duration>", "TTL given to every message"))
    .action(
      go((ctx, name: string, o: { policy?: "reject" | "drop-oldest"; retain?: string }) =>
        admin.createTopic(ctx, name, o)
      ),
    );
  topic.command("purge <name>")
    .description("remove every message of a topic")
    .action(go((ctx, name: string) => admin.purge(ctx, name)));
  topic.command("delete <name>")
    .description("delete a topic and its WAL file")
    .action(go((ctx, name: string) => admin.deleteTopic(ctx, name)));

  program.command("groups <topic>")
    .description("list the consumer groups of a topic")
    .action(go((ctx, t: string) => admin.groups(ctx, t)));

  program.command("redrive <topic>")
    .description("move every message of <topic>.dlq back to <topic>")
    .action(go((ctx, t: string) => admin.redrive(ctx, t)));

  program.command("stats")
    .description("totals and per-topic figures")
    .action(go((ctx) => admin.stats(ctx)));

  program.command("health")
    .description("whether the broker is up (exit 1 when draining or electing)")
    .action(go((ctx) => admin.health(ctx)));

  const webhook = program.command("webhook").description("add, list or delete webhooks");
  webhook.command("add <topic> <url>")
    .description("POST each message of the topic to the URL")
    .option("--secret <secret>", "sign each POST with this secret (X-Ferry-Signature)")
    .action(
      go((ctx, t: string, u: string, o: { secret?: string }) => webhooks.addWebhook(ctx, t, u, o)),
    );
  webhook.command("list <topic>")
    .description("list the webhooks of a topic")
    .action(go((ctx, t: string) => webhooks.listWebhooks(ctx, t)));
  webhook.command("delete <id>")
    .description("delete a webhook")
    .action(go((ctx, id: string) => webhooks.deleteWebhook(ctx, id)));

  program.command("drain")
    .description("stop the broker taking requests (until it restarts)")
    .action(go((ctx) => admin.drain(ctx)));

  const key = program.command("key").description("work with API keys (offline)");
  key.command("hash [key]")
    .description("print the keys-file entry (sha256:<hex>) for a key; reads stdin without one")
    .action(go((ctx, k: string | undefined) => hashKey(ctx, k)));

  return program;
}

/** An option whose value must be a duration (`250ms`, `30s`, `5m`, `1h`). */
function durationOption(flags: string, description: string): Option {
  return new Option(flags, description).argParser((v: string) => {
    if (readDuration(v) === undefined) {
      throw new InvalidArgumentError("Expected an integer and a unit ms, s, m or h, like 30s.");
    }
    return v;
  });
}

/** --wait as milliseconds (checked as a duration first). */
function waitMs(v: string): number {
  const ms = readDuration(v);
  if (ms === undefined) {
    throw new InvalidArgumentError("Expected an integer and a unit ms, s, m or h, like 30s.");
  }
  return ms;
}

function limit(v: string): number {
  const n = Number(v);
  if (!/^\d+$/.test(v) || n < 1 || n > MAX_LIMIT) {
    throw new InvalidArgumentError(`Expected a whole number from 1 to ${MAX_LIMIT}.`);
  }
  return n;
}

/** 'X-MQ-Name: value' into [name, value], appended to those given before. */
function header(v: string, before: [string, string][]): [string, string][] {
  const m = /^\s*(X-MQ-[A-Za-z0-9-]+)\s*:\s?(.*)$/i.exec(v);
  if (!m) {
    throw new InvalidArgumentError(
      "Expected 'X-MQ-Name: value'; only X-MQ-* headers are stored with a message.",
    );
  }
  return [...before, [m[1]!, m[2]!]];
}
