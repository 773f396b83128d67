"""Recipe `snapshot-restore` (issue 11, FaaSnap §6): cold starts restored from process snapshots
per restore mode, with the snapshot's files dropped from the page cache or cached.

* `pagecache.py`: one snapshot's files out of or into the page cache, and how much of them is
  resident;
* `locate.py`: an action's snapshot directory (named by its restores, or under --state-dir);
* `run.py`: the protocol (actions per function and mode, the recording restore, the measured
  restores, normal starts for comparison);
* `analysis.py`: the summary (medians, ratios, memory, targets), pure functions;
* `render.py`: the markdown tables and the plot.
"""
