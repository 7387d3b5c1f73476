// A port for a server a test starts later: below the kernel's ephemeral range, so that no
// outgoing connection or listen(0) of another test can take it between the pick and the listen.
import { readFileSync } from 'node:fs';
import net from 'node:net';

const EPHEMERAL_LOW = ephemeralLow();
/** Ports no test should take: below 10000, where real services listen. */
const LOWEST = 10_000;

export async function freePort(): Promise<number> {
  if (EPHEMERAL_LOW - LOWEST < 1000) return kernelPort();
  for (let i = 0; i < 50; i++) {
    const port = LOWEST + Math.floor(Math.random() * (EPHEMERAL_LOW - LOWEST));
    if (await bindable(port)) return port;
  }
  return kernelPort();
}

function ephemeralLow(): number {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 0;
  } catch {
    return 0;
  }
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

function kernelPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
