// How an asynchronous stage's parameter store sends its snapshots (actors/param-store-snapshot.ts)
// to the launcher, which keeps the newest of each stage (job/snapshot-keeper.ts): on
// baton.<job>.state.<stage>, sealed like every message of the job, stamped with its launch.
// The store only copies its state; encoding and publishing wait for the next turn of the
// event loop, so the update that took the snapshot returns at once.

import type { AsyncSnapshot } from '../actors/param-store-snapshot';
import { Bus } from '../transport/bus';
import { encodeValue } from '../transport/codec';
import { launchField } from '../transport/envelope';
import { subject } from '../transport/subjects';

/** The store's `send` for stage `stage` of `job` in launch `launch`; `copyMs` (the store's copy) rides along,
 * and `last`: the state as the stage stood when its job was dropped. */
export function snapshotSender(
  bus: Bus,
  job: string,
  stage: number,
  launch: string | undefined,
): (snap: AsyncSnapshot, copyMs: number, last?: boolean) => void {
  return (snap, copyMs, last = false) =>
    setImmediate(() => {
      try {
        bus.publish(
          subject(job, 'state', stage),
          encodeValue({
            verb: 'state',
            job,
            stage,
            updates: snap.updates,
            copyMs,
            last,
            snapshot: snap,
            ...launchField(launch),
          }),
        );
      } catch {
        // The job was dropped meanwhile (its bus closed): the launcher keeps the snapshot before.
      }
    });
}
