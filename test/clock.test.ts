import { strict as assert } from 'assert';
import { ClockError, RealClock, VirtualClock } from '../base/clock';
import { ActorRuntime } from '../actors/runtime';

describe('virtual clock', () => {
  it('fires timers in time order, ties in the order they were set', async () => {
    const c = new VirtualClock();
    const seen: string[] = [];
    c.setTimer(5, () => seen.push(`a@${c.now()}`));
    c.setTimer(1, () => seen.push(`b@${c.now()}`));
    c.setTimer(5, () => seen.push(`c@${c.now()}`));
    c.setTimer(0, () => c.setTimer(2, () => seen.push(`d@${c.now()}`)));
    const stopped = await c.run(() => false);
    assert.equal(stopped, false);
    assert.deepEqual(seen, ['b@1', 'd@2', 'a@5', 'c@5']);
  });

  it('waits for counted work before advancing', async () => {
    const c = new VirtualClock();
    const seen: number[] = [];
    c.enter();
    c.setTimer(10, () => seen.push(c.now()));
    setTimeout(() => {
      seen.push(-1);
      c.leave();
    }, 20);
    await c.run(() => false);
    assert.deepEqual(seen, [-1, 10]);
  });

  it('stops when asked and skips cleared timers', async () => {
    const c = new VirtualClock();
    let fired = 0;
    const h = c.setTimer(3, () => fired++);
    c.clearTimer(h);
    c.setTimer(4, () => fired++);
    c.setTimer(9, () => fired++);
    assert.equal(await c.run(() => c.now() >= 4), true);
    assert.equal(fired, 1);
    assert.equal(c.pendingTimers, 1);
  });

  it('refuses negative and non-finite durations', () => {
    const c = new VirtualClock();
    assert.throws(() => c.setTimer(-1, () => {}), ClockError);
    assert.throws(() => c.setTimer(NaN, () => {}), ClockError);
  });
});

describe('a runtime shutting down', () => {
  it("cancels its clock's pending timers, so a held message neither fires nor keeps the process alive", async () => {
    const timeouts = () =>
      (process as unknown as { getActiveResourcesInfo(): string[] })
        .getActiveResourcesInfo()
        .filter((r) => r === 'Timeout').length;
    const runtime = new ActorRuntime(new RealClock());
    const before = timeouts();
    let fired = 0;
    runtime.clock.setTimer(30, () => fired++);
    runtime.clock.setTimer(3_600_000, () => fired++);
    assert.equal(timeouts(), before + 2);
    runtime.shutdown();
    assert.equal(timeouts(), before, 'no timer of the runtime is left to keep the process alive');
    await new Promise((r) => setTimeout(r, 80));
    assert.equal(fired, 0);
  });
});

describe('real clock', () => {
  it('sleeps through a timer longer than Node allows (2^31 - 1 ms) instead of firing or spinning', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    const clock = new RealClock();
    let fired = false;
    const h = clock.setTimer(3e9, () => (fired = true));
    const cpu0 = process.cpuUsage();
    await new Promise((r) => setTimeout(r, 300));
    const cpu = process.cpuUsage(cpu0);
    clock.clearTimer(h);
    process.off('warning', onWarning);
    assert.equal(fired, false);
    assert.deepEqual(
      warnings.filter((w) => w === 'TimeoutOverflowWarning'),
      [],
    );
    // Spinning until the deadline would take the whole 300 ms of CPU.
    assert.ok(cpu.user + cpu.system < 150_000, `the timer used ${(cpu.user + cpu.system) / 1000} ms of CPU in 300 ms`);
  });

  it('fires a short timer on time, after its deadline', async () => {
    const clock = new RealClock();
    const t0 = performance.now();
    const at = await new Promise<number>((r) => clock.setTimer(20, () => r(performance.now())));
    assert.ok(at - t0 >= 20, `fired after ${at - t0} ms`);
  });
});
