"""Two network namespaces joined by a veth pair: two "hosts" on one machine, each with its own
address and loopback, sharing the filesystem. Needs root and iproute2's `ip`. Names carry the
process id, so runs side by side do not collide; `remove` (also on SIGTERM/SIGINT and at exit)
deletes both namespaces, and with them the veth pair.
"""
import atexit
import os
import shutil
import signal
import subprocess
import sys


class TwoHosts:
    def __init__(self, tag=None):
        pid = os.getpid()
        self.tag = tag or f'ef{pid % 100000}'
        self.ns = [f'{self.tag}a', f'{self.tag}b']
        self.ifname = [f'{self.tag}va', f'{self.tag}vb']  # at most 15 characters
        subnet = f'10.{200 + pid % 50}.{pid % 250}'
        self.addr = [f'{subnet}.1', f'{subnet}.2']
        self.subnet = subnet

    @staticmethod
    def _sh(*cmd):
        return subprocess.run(cmd, capture_output=True, text=True)

    def make(self):
        """Builds both; returns None, or why it could not (then nothing is left behind)."""
        if os.geteuid() != 0:
            return 'not root'
        if not shutil.which('ip'):
            return "no `ip` (iproute2)"
        atexit.register(self.remove)
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, lambda *_: (self.remove(), sys.exit(1)))
        steps = [('ip', 'netns', 'add', n) for n in self.ns]
        steps.append(('ip', 'link', 'add', self.ifname[0], 'type', 'veth', 'peer', 'name', self.ifname[1]))
        for ns, ifname, addr in zip(self.ns, self.ifname, self.addr):
            steps += [('ip', 'link', 'set', ifname, 'netns', ns),
                      ('ip', '-n', ns, 'addr', 'add', addr + '/24', 'dev', ifname),
                      ('ip', '-n', ns, 'link', 'set', ifname, 'up'),
                      ('ip', '-n', ns, 'link', 'set', 'lo', 'up')]
        for s in steps:
            r = self._sh(*s)
            if r.returncode != 0:
                self.remove()
                return f'{" ".join(s)}: {r.stderr.strip() or r.returncode}'
        return None

    def remove(self):
        for n in self.ns:  # deleting a namespace deletes its end of the veth pair, and so the pair
            self._sh('ip', 'netns', 'del', n)
        self._sh('ip', 'link', 'del', self.ifname[0])

    def run_in(self, i, cmd):
        """The command line that runs `cmd` on host i."""
        return ['ip', 'netns', 'exec', self.ns[i]] + list(cmd)
