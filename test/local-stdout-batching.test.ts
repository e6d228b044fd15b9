import { describe, expect, it } from 'vitest';
import { batchStdoutWrites } from '../local/stdout-batching';

// npm start's stdout (local/stdout-batching.ts): the lines of one turn of the event loop leave in
// one write, in order, and nothing written is held back past that turn.

function recordingStream() {
  const writes: unknown[][] = [];
  const stream = { write: (...args: unknown[]) => writes.push(args) > 0 } as unknown as NodeJS.WriteStream;
  return { stream, writes };
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('npm start stdout', () => {
  it('sends the lines of one turn in one write, in order', async () => {
    const { stream, writes } = recordingStream();
    batchStdoutWrites(stream);
    stream.write('{"n":1}\n');
    stream.write('{"n":2}\n');
    stream.write('{"n":3}\n');
    expect(writes).toEqual([]);
    await nextTurn();
    expect(writes).toEqual([['{"n":1}\n{"n":2}\n{"n":3}\n']]);
    stream.write('{"n":4}\n');
    await nextTurn();
    expect(writes).toEqual([['{"n":1}\n{"n":2}\n{"n":3}\n'], ['{"n":4}\n']]);
  });

  it('keeps the order when something else is written between lines', async () => {
    const { stream, writes } = recordingStream();
    batchStdoutWrites(stream);
    const done = () => undefined;
    stream.write('a\n');
    stream.write(Buffer.from('b\n'));
    stream.write('c\n', done);
    stream.write('d\n');
    await nextTurn();
    expect(writes).toEqual([['a\n'], [Buffer.from('b\n')], ['c\n', done], ['d\n']]);
  });

  it('lets a burst out before it grows past 64 KiB', () => {
    const { stream, writes } = recordingStream();
    batchStdoutWrites(stream);
    const line = `${'x'.repeat(1023)}\n`;
    for (let index = 0; index < 65; index++) stream.write(line);
    expect(writes).toHaveLength(1);
    expect((writes[0]![0] as string).length).toBe(65 * 1024);
  });
});
