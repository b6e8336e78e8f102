"""ollie-remote: agents on other machines, over OpenSSH (no new daemon, no new protocol).

* ``ssh``: command lines with the options we insist on (BatchMode, strict host keys);
* ``deploy``: copy a tools directory there (rsync or tar, manifest-based deletion);
* ``connect``: the supervisor that keeps ``ssh -R`` forwarding the broker socket;
* ``state``: the local records of connections and deployed hosts;
* ``identify``: the broker hook that labels forwarded connections remote;
* ``fetch``: a remote host's registry for the Tool Browser.

See docs/remote.md.
"""
