// Parameter copies by weight version, made lazily: an update copies the parameters it is
// about to change only if a microbatch in flight saw them, and a copy is freed when the
// last microbatch that saw it runs its backward. Versions shared by several microbatches
// are stored once. Weight stashing copies every parameter; FRESCO only those it does not
// project.

import { ParamMap } from '../optim/params';
import { FlightLog } from './policy';

export class CopyOnUpdate {
  private version = 0;
  private readonly flight = new FlightLog();
  private readonly copies = new Map<number, Map<string, Float32Array>>();

  /** `policy` names the owner in errors; `copied` says which parameters a copy holds. */
  constructor(
    private readonly policy: string,
    private readonly copied: (name: string) => boolean = () => true,
  ) {}

  /** Microbatch `mb` ran its forward on the current version. */
  enter(mb: number): void {
    this.flight.enter(this.policy, mb, this.version);
  }

  /** The copy of the version mb's forward saw, or undefined when that is still the current one. */
  seenBy(mb: number): ReadonlyMap<string, Float32Array> | undefined {
    return this.copies.get(this.flight.since(this.policy, mb, 'backward'));
  }

  /** Microbatch `mb` ran its backward: its version is freed unless another in flight saw it. */
  leave(mb: number): void {
    const v = this.flight.leave(this.policy, mb);
    for (const other of this.flight.values()) if (other === v) return;
    this.copies.delete(v);
  }

  /** Call with the parameters an update is about to change (still the current version). */
  beforeUpdate(params: ParamMap): void {
    let needed = false;
    for (const v of this.flight.values()) if (v === this.version) needed = true;
    if (needed && !this.copies.has(this.version)) {
      const copy = new Map<string, Float32Array>();
      for (const [name, p] of params) if (this.copied(name)) copy.set(name, p.slice());
      this.copies.set(this.version, copy);
    }
    this.version += 1;
  }

  /** Distinct versions held. */
  get versionsHeld(): number {
    return this.copies.size;
  }

  bytes(): number {
    let b = 0;
    for (const c of this.copies.values()) for (const p of c.values()) b += p.byteLength;
    return b;
  }
}
