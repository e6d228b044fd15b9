/** The folder of the current bundle of `entry` (default local/admin.ts), built first if a source it holds changed. */
export function adminBundle(options?: { root?: string; entry?: string; cache?: string }): Promise<string>;
