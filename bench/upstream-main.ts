// The fake OpenAI upstream in a process of its own, as a real router is: prints its URL.
import type { AddressInfo } from 'node:net';
import { startUpstream } from './llm-proxy.js';

const server = await startUpstream();
console.log(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`);
