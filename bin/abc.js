#!/usr/bin/env node
// Runs the TypeScript CLI in this process through tsx's loader: no build step,
// and signals reach ABC directly.
import { register } from 'tsx/esm/api';

register();
await import('../src/main/cli.ts');
