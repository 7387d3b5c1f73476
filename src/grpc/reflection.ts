// gRPC server reflection (grpc.reflection.v1 and v1alpha, @grpc/reflection)
// over the descriptors `npm run generate` builds from proto/ (gen/abc.binpb,
// with comments): every service of the core, its messages and their imports.
import { readFileSync } from 'node:fs';
import { loadFileDescriptorSetFromBuffer } from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';

const DESCRIPTORS = new URL('../../gen/abc.binpb', import.meta.url);

export function reflection(): ReflectionService {
  return new ReflectionService(loadFileDescriptorSetFromBuffer(readFileSync(DESCRIPTORS)));
}
