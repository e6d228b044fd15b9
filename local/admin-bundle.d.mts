/**
 * The folder of the current bundle of `entry` (default local/admin.ts) as `<name>.mjs` (default admin), built first if
 * a source it holds changed.
 */
export function adminBundle(options?: {
  root?: string;
  entry?: string;
  name?: string;
  cache?: string;
  /** Packages left out of the bundle besides classic-level and dynalite. */
  external?: string[];
}): Promise<string>;
