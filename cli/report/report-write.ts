// run --report and train --report: the report of the job just run, written straight from
// its result (the same HTML as `baton report` makes from the files).

import * as fs from 'fs';
import { JobResult } from '../../job/run-local';
import { ParsedFlags, UsageError } from '../args';
import { checkOutputFile, writtenFileKey } from '../output-paths';
import { Row, runReportData } from './report-data';
import { reportHtml } from './report-html';

/** The --report path, checked before the run: writable, and not a file another flag writes. */
export function reportPath(flags: ParsedFlags, command: string, others: readonly unknown[]): string | undefined {
  const file = flags.report as string | undefined;
  if (file === undefined) return undefined;
  checkOutputFile(file, `${command}: --report`);
  for (const o of others)
    if (typeof o === 'string' && writtenFileKey(o) === writtenFileKey(file))
      throw new UsageError(`${command}: --report ${file} is a file another flag writes as well; give it its own path`);
  return file;
}

/** Writes the report of finished runs (one row per result, labels as their --compare entries); returns the file. */
export function writeRunReport(
  file: string,
  rows: readonly Row[],
  results: readonly JobResult[],
  labels: readonly string[],
  title?: string,
): string {
  const names = labels.join(' vs ');
  const data = runReportData(title ?? `Baton report: ${names}`, rows, results, labels, `written by the run itself`);
  fs.writeFileSync(file, reportHtml(data));
  return file;
}
