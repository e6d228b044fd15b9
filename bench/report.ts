import { mkdir, writeFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { dirname } from 'node:path';
import type { LoadResult } from './load';

// Machine description, number-to-env parsing, plain-text tables and the JSON file.

export function machine() {
  const list = cpus();
  return {
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    cpuModel: list[0]?.model.trim() ?? 'unknown',
    cores: list.length,
  };
}

export function numberFromEnv(name: string, fallback: number, { integer = false, min = 0 } = {}): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= min || (integer && !Number.isInteger(value))) {
    throw new Error(`${name} must be a ${integer ? 'whole ' : ''}number above ${min}, got '${raw}'`);
  }
  return value;
}

export const fmt = (value: number, digits = 0) =>
  Number.isFinite(value)
    ? value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
    : '-';

/** A right-aligned table, first column left-aligned. */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((header, column) =>
    Math.max(header.length, ...rows.map((row) => (row[column] ?? '').length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!)))
      .join('  ');
  return [line(headers), widths.map((width) => '-'.repeat(width)).join('  '), ...rows.map(line)].join('\n');
}

export const loadHeaders = [
  'endpoint',
  'requests',
  'req/s',
  'p50 ms',
  'p90 ms',
  'p99 ms',
  'max ms',
  'errors',
  'CPU srv/gen',
];

/** The same columns for gRPC runs (one row per RPC; every call is one unary RPC). */
export const rpcHeaders = ['RPC', 'calls', 'RPCs/s', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'errors', 'CPU srv/gen'];

export function loadRow(name: string, result: LoadResult): string[] {
  const cpu = `${result.cpu.serverPercent ?? '?'}% / ${result.cpu.loadGeneratorPercent}%`;
  return [
    name,
    fmt(result.count),
    fmt(result.rps, 1),
    fmt(result.p50, 2),
    fmt(result.p90, 2),
    fmt(result.p99, 2),
    fmt(result.max, 1),
    fmt(result.errors),
    cpu,
  ];
}

/** One line per kind of error, for runs (measured or warm-up) that had any. */
export function errorLines(named: Array<[string, LoadResult]>): string[] {
  const lines: string[] = [];
  for (const [name, result] of named) {
    if (result.errors > 0)
      lines.push(
        `  ${name}: ${result.errors} errors: ${Object.entries(result.errorKinds)
          .map(([kind, count]) => `${kind} ×${count}`)
          .join(', ')}`,
      );
    if (result.warmupErrors > 0) lines.push(`  ${name}: ${result.warmupErrors} errors during warm-up`);
  }
  return lines;
}

export const opsHeaders = ['operation', 'ops/s', 'µs/op'];

export function opsRow(name: string, result: { opsPerSecond: number; microsPerOp: number }): string[] {
  return [name, fmt(result.opsPerSecond), fmt(result.microsPerOp, 1)];
}

export async function writeJson(path: string, value: unknown): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, `${JSON.stringify(value, null, 2)}\n`);
}
