// Writes made in one tick leave in one: the stream is corked at the first of
// them and uncorked when the tick ends, so frames that arrive together cost one
// socket write instead of one each.
export function corkPerTick(stream: { cork(): void; uncork(): void } | undefined): () => void {
  let corked = false;
  const uncork = () => {
    corked = false;
    stream?.uncork();
  };
  return () => {
    if (!stream || corked) return;
    corked = true;
    stream.cork();
    process.nextTick(uncork);
  };
}
