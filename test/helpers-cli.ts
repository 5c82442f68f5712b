import { main } from '../cli/main';

/** `baton …` run in this process: its exit status, what it printed, and what it wrote to stderr. */
export async function batonInProcess(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((s: string) => {
    err += s;
    return true;
  }) as typeof process.stderr.write;
  try {
    const code = await main(argv, (s) => (out += `${s}\n`));
    return { code, out, err };
  } finally {
    process.stderr.write = write;
  }
}
