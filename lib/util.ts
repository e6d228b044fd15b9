import { fileURLToPath } from 'node:url';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { LogRetentionDays } from './config';

/** The repository root: Lambda entries, package-lock.json and the Docker build context. */
export const repoRoot = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');

/** RetentionDays' values are the day counts themselves; config.ts only allows valid ones. */
export const logRetention = (days: LogRetentionDays) => days as unknown as RetentionDays;
