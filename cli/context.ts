/** What every command runs with: the client, the output channels, and the settings. */

import type { Ferry } from "../clients/ts/mod.ts";
import type { Output } from "./output.ts";
import type { Settings } from "./settings.ts";

/** A command's world. */
export interface Ctx {
  ferry: Ferry;
  out: Output;
  settings: Settings;
  /** Aborted by Ctrl-C, so long-running commands (tail, consume --follow) end cleanly. */
  signal: AbortSignal;
  /** Where relative file names are read from (the caller's directory under `deno task`). */
  cwd: string;
  /** Whether stdin and stderr are terminals (a progress bar, a prompt for data). */
  stdinIsTerminal: boolean;
  stderrIsTerminal: boolean;
}
