import { strict as assert } from 'assert';
import {
  SHAPE_LIMITS,
  TaskParseError,
  allTasks,
  validateShape,
  formatTask,
  fromVirtual,
  forwardSuccessor,
  backwardSuccessor,
  parseTask,
  task,
  virtualStage,
} from '../policies/task';

describe('task IR', () => {
  it('formats and parses back unchanged', () => {
    for (const text of ['F0', 'B3', 'W12', 'F3@1', 'B0@2', 'W7@3']) assert.equal(formatTask(parseTask(text)), text);
    assert.deepEqual(parseTask('F3@1'), task('F', 3, 1));
    assert.equal(formatTask(task('B', 2, 0)), 'B2');
  });

  it('quotes the input and the grammar on a parse error', () => {
    for (const bad of ['', 'X1', 'F', 'F-1', 'F1@', 'f1', 'F1@x', ' F1']) {
      assert.throws(
        () => parseTask(bad),
        (e: unknown) =>
          e instanceof TaskParseError && e.message.includes(JSON.stringify(bad)) && e.message.includes('<F|B|W>'),
      );
    }
  });

  it('walks the interleaved path 0..P-1 once per chunk', () => {
    const shape = { stages: 3, chunks: 2, microbatches: 4, splitBackward: false };
    const path: string[] = [];
    let at: { stage: number; chunk: number } | null = { stage: 0, chunk: 0 };
    while (at) {
      path.push(`${at.stage}@${at.chunk}`);
      at = forwardSuccessor(at.stage, at.chunk, shape);
    }
    assert.deepEqual(path, ['0@0', '1@0', '2@0', '0@1', '1@1', '2@1']);
    assert.deepEqual(backwardSuccessor(0, 1, shape), { stage: 2, chunk: 0 });
    assert.equal(backwardSuccessor(0, 0, shape), null);
    assert.deepEqual(fromVirtual(virtualStage(1, 1, shape), shape), { stage: 1, chunk: 1 });
  });

  it('lists every task of a stage once, with W only when backward is split', () => {
    assert.equal(allTasks({ stages: 2, chunks: 2, microbatches: 3, splitBackward: false }).length, 12);
    assert.equal(allTasks({ stages: 2, chunks: 2, microbatches: 3, splitBackward: true }).length, 18);
  });

  it('refuses shapes too large to hold per-task state for, naming the bound', () => {
    const ok = { stages: 32, chunks: 2, microbatches: 192, splitBackward: false };
    validateShape(ok);
    validateShape({ ...ok, stages: SHAPE_LIMITS.stages, chunks: 1, microbatches: 1000 });
    for (const [shape, re] of [
      [{ ...ok, microbatches: 1e8 }, /chunks × microbatches .* must be at most 262144, got 200000000/],
      [{ ...ok, stages: 5000 }, /stages must be at most 1024, got 5000/],
      [{ ...ok, chunks: 65 }, /chunks must be at most 64, got 65/],
      [
        { ...ok, stages: 1000, chunks: 1, microbatches: 2000 },
        /stages × chunks × microbatches must be at most 1048576, got 2000000/,
      ],
    ] as const)
      assert.throws(
        () => validateShape(shape),
        (e: Error) => e.name === 'ShapeError' && re.test(e.message),
      );
  });
});
