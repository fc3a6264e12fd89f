/**
 * Where `ferry` writes: results to stdout (text for people, or JSON for scripts), notices and
 * failures to stderr. Colour only when stdout is a terminal, never with NO_COLOR or --json.
 * Neither mode hands a terminal a control character from the broker (docs/cli.md).
 */

import { shown } from "./escape.ts";

const encoder = new TextEncoder();

/**
 * DEL and the C1 controls, which JSON.stringify leaves as they are (it escapes only C0); they can
 * occur only inside JSON strings, where `\u` escapes keep the value.
 */
const JSON_RAW_CONTROL = /[\x7f-\x9f]/g;

/** JSON text with DEL and C1 controls escaped too, so it is safe on a terminal. */
function safeJson(value: unknown, indent?: number): string {
  return JSON.stringify(value, null, indent).replace(
    JSON_RAW_CONTROL,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

/** stdout was closed by its reader (`ferry tail | head -3`): the command ends quietly. */
export class StdoutClosed extends Error {}

/** ANSI styles, each a no-op when colour is off. */
export interface Paint {
  bold(s: string): string;
  dim(s: string): string;
  green(s: string): string;
  yellow(s: string): string;
  red(s: string): string;
  cyan(s: string): string;
}

const style = (open: number, close: number) => (s: string) => `\x1b[${open}m${s}\x1b[${close}m`;
const COLOURS: Paint = {
  bold: style(1, 22),
  dim: style(2, 22),
  green: style(32, 39),
  yellow: style(33, 39),
  red: style(31, 39),
  cyan: style(36, 39),
};
const plain = (s: string) => s;
const PLAIN: Paint = {
  bold: plain,
  dim: plain,
  green: plain,
  yellow: plain,
  red: plain,
  cyan: plain,
};

/** Writes to a byte sink; tests pass their own. */
export interface Sink {
  write(p: Uint8Array): Promise<number>;
}

/** One command's output channels. */
export class Output {
  readonly paint: Paint;

  constructor(
    readonly json: boolean,
    readonly color: boolean,
    private readonly stdout: Sink = Deno.stdout,
    private readonly notify: (line: string) => void = (line) => console.error(line),
  ) {
    this.paint = color && !json ? COLOURS : PLAIN;
  }

  /** The process's own terminal decides the colour. */
  static forProcess(json: boolean): Output {
    return new Output(json, !json && Deno.stdout.isTerminal() && !Deno.noColor);
  }

  /** Prints text (a newline is added) for people. */
  async print(text: string): Promise<void> {
    await this.#write(text.endsWith("\n") ? text : `${text}\n`);
  }

  /** Prints the command's one JSON document. */
  async document(value: unknown): Promise<void> {
    await this.#write(`${safeJson(value, 2)}\n`);
  }

  /** Prints one JSON object on its own line (tail, consume --follow). */
  async line(value: unknown): Promise<void> {
    await this.#write(`${safeJson(value)}\n`);
  }

  /** A notice for the person at the terminal, on stderr, in JSON mode too; one line. */
  notice(text: string): void {
    this.notify(`ferry: ${shown(text)}`);
  }

  async #write(text: string): Promise<void> {
    const bytes = encoder.encode(text);
    try {
      for (let done = 0; done < bytes.length;) {
        done += await this.stdout.write(bytes.subarray(done));
      }
    } catch (e) {
      if (e instanceof Deno.errors.BrokenPipe) throw new StdoutClosed();
      throw e;
    }
  }
}
