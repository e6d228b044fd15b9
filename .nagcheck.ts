import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Bucket } from 'aws-cdk-lib/aws-s3';
import { createServiceApp } from './lib/app';
const { app, stacks } = createServiceApp({ outdir: mkdtempSync(join(tmpdir(), 'nagcheck-')), environments: ['sandbox'] });
new Bucket(stacks.sandbox, 'Unlogged');
try { app.synth(); console.log('SYNTH OK (unexpected)'); } catch (error) { console.log('SYNTH FAILED:', String(error).slice(0, 300)); }
