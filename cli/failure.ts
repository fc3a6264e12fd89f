/**
 * How `ferry` fails: the exit codes of docs/cli.md, and a failure that carries
 * its code and the one line stderr gets.
 */

/** 0 ok, 1 the broker refused, 2 usage, 3 cannot connect, 130 interrupted (128 + SIGINT). */
export const EXIT = { ok: 0, refused: 1, usage: 2, unreachable: 3, interrupted: 130 } as const;

/** A failure with its exit code and its one-line message. */
export class CliFailure extends Error {
  constructor(readonly exitCode: number, message: string) {
    super(message);
  }
}

/** A usage error (exit 2): a bad flag value, a missing argument, a file that cannot be read. */
export function usage(message: string): CliFailure {
  return new CliFailure(EXIT.usage, message);
}

/** The broker answered, but not with what the command needs (exit 1). */
export function refused(message: string): CliFailure {
  return new CliFailure(EXIT.refused, message);
}

/** A message on one line, without the trailing period the style guide leaves out. */
export function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, " ").trim().replace(/\.$/, "");
}
