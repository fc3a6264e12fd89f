/**
 * `ferry`, the command-line tool: `deno task ferry …` from a checkout, or `ferry …` once
 * installed (docs/cli.md). Exits 0 ok, 1 refused, 2 usage, 3 cannot connect.
 */

import { run } from "./program.ts";

Deno.exit(await run(Deno.args));
