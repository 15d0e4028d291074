# JupyterHub configuration of the course's demo hub (one machine, system users). Started by
#   python -m instructors.batch hub serve ...      (make hub; docs/instructors.md, "Teaching on JupyterHub")
# which sets the COURSE_HUB_* variables read below. Production on Kubernetes: Zero to JupyterHub, see the guide.
import os
import sys
from pathlib import Path

c = get_config()  # noqa: F821 - provided by JupyterHub when it loads this file

env = os.environ
hub_dir = Path(env["COURSE_HUB_DIR"])
public, hub_port, proxy_api = (int(p) for p in env["COURSE_HUB_PORTS"].split(","))
ip = env.get("COURSE_HUB_IP", "127.0.0.1")
students = {n for n in env.get("COURSE_HUB_STUDENTS", "").split(",") if n}
instructors = {n for n in env.get("COURSE_HUB_INSTRUCTORS", "").split(",") if n}

# Where the hub listens; its own API and the proxy's API stay on the loopback.
c.JupyterHub.bind_url = f"http://{ip}:{public}"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = hub_port
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{proxy_api}"
c.ConfigurableHTTPProxy.command = [env["COURSE_HUB_PROXY"]]
c.ConfigurableHTTPProxy.should_start = True

# State: root only (hub/state is 0700).
state = hub_dir / "state"
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(state / "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True  # Ctrl-C stops every user's server too
c.JupyterHub.cleanup_proxy = True

# Log-in: system users and their passwords (PAM), only the class; instructors are hub admins.
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = students | instructors
c.Authenticator.admin_users = instructors
c.PAMAuthenticator.open_sessions = False

# Each user's JupyterLab runs as that user, in their home, with the course kernel: the course package is
# the student release in hub/course (no answer keys), the model cache hub/cache (read-only for students).
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [str(Path(sys.prefix) / "bin" / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.args = ["--MultiKernelManager.default_kernel_name=gpu-int8-course"]
c.Spawner.environment = {
    "PYTHONPATH": str(hub_dir / "course"),
    "WORKBOOK_CACHE": str(hub_dir / "cache"),
    "MPLBACKEND": "module://matplotlib_inline.backend_inline",
}
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
