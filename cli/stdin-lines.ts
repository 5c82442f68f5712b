// The first lines of a stream (a stage process's stdin, which only its launcher holds),
// leaving the stream flowing: `baton node --exit-with-stdin` watches its end.

/** The first `count` lines of `input` (each at most `maxLine` characters), without their newlines. */
export function readLines(input: NodeJS.ReadableStream, count: number, maxLine = 4096): Promise<string[]> {
  return new Promise((resolve, reject) => {
    let text = '';
    const done = () => {
      input.off('data', onData);
      input.off('end', onEnd);
    };
    const onData = (d: Buffer) => {
      text += d.toString('utf8');
      const lines = text.split('\n');
      // The last piece is a line not yet ended.
      if (lines.length > count) {
        done();
        resolve(lines.slice(0, count));
      } else if (lines[lines.length - 1].length > maxLine) {
        done();
        reject(new RangeError(`line ${lines.length} of stdin is over ${maxLine} characters`));
      }
    };
    const onEnd = () => {
      done();
      reject(new RangeError(`stdin ended after ${text.split('\n').length - 1} of ${count} lines`));
    };
    input.on('data', onData);
    input.once('end', onEnd);
  });
}
