import { DurationModel } from '../models/durations';
import { ScheduledTask } from '../checks/offline-reference';
import { PipelineShape, Task, allTasks, formatTask } from '../policies/task';
import { dependenciesOf } from './helpers-task';

/**
 * The problems of an offline schedule, checked here from the task definitions alone
 * (policies/task.ts), not with the graph the reference built: every task once with its
 * duration; F after its predecessor's F plus the message; B after its F and the next
 * virtual stage's B plus the message; W after its B; one task at a time per stage; at most
 * caps[s] forwards in flight (F start to B end, W end with split) at stage s.
 */
export function scheduleProblems(
  shape: PipelineShape,
  d: DurationModel,
  caps: readonly number[],
  sched: readonly ScheduledTask[],
): string[] {
  const out: string[] = [];
  const at = new Map<string, ScheduledTask>();
  const key = (s: number, t: Task) => `${s}:${formatTask(t)}`;
  for (const x of sched) {
    if (at.has(key(x.stage, x.task))) out.push(`stage ${x.stage}: ${formatTask(x.task)} twice`);
    at.set(key(x.stage, x.task), x);
  }
  const eps = 1e-9;
  for (let s = 0; s < shape.stages; s++)
    for (const t of allTasks(shape)) {
      const x = at.get(key(s, t));
      const where = `stage ${s}, ${formatTask(t)}`;
      if (!x) {
        out.push(`${where}: missing`);
        continue;
      }
      if (Math.abs(x.end - x.start - d.compute(0, s, t)) > eps)
        out.push(`${where}: lasts ${x.end - x.start}, not ${d.compute(0, s, t)}`);
      const after = (stage: number, dep: Task, delay: number, what: string) => {
        const y = at.get(key(stage, dep));
        if (y && x.start < y.end + delay - eps)
          out.push(
            `${where}: starts at ${x.start} before ${what} ${formatTask(dep)} at stage ${stage} (${y.end} + ${delay})`,
          );
      };
      const deps = dependenciesOf(s, t, shape);
      for (const dep of deps) after(dep.stage, dep.task, dep.remote ? d.comm(0, dep.stage, dep.task) : 0, dep.what);
      if (deps.length === 0 && x.start < -eps) out.push(`${where}: starts before 0`);
    }
  for (let s = 0; s < shape.stages; s++) {
    const mine = sched.filter((x) => x.stage === s).sort((a, b) => a.start - b.start);
    for (let i = 1; i < mine.length; i++)
      if (mine[i].start < mine[i - 1].end - eps)
        out.push(
          `stage ${s}: ${formatTask(mine[i].task)} at ${mine[i].start} while ${formatTask(mine[i - 1].task)} runs until ${mine[i - 1].end}`,
        );
    // In flight: +1 at each F's start, -1 at each release's end; at equal times the release first.
    const release = shape.splitBackward ? 'W' : 'B';
    const steps = mine
      .flatMap((x) =>
        x.task.kind === 'F' ? [{ t: x.start, d: 1 }] : x.task.kind === release ? [{ t: x.end, d: -1 }] : [],
      )
      .sort((a, b) => a.t - b.t || a.d - b.d);
    let n = 0;
    for (const e of steps)
      if ((n += e.d) > caps[s]) {
        out.push(`stage ${s}: ${n} forwards in flight at ${e.t}, cap ${caps[s]}`);
        break;
      }
  }
  return out;
}
