"""Doubles that only the tests and the benchmarks use: GitLab's API, Git's smart HTTP and SSH servers, Slack's
Web API and webhooks, and the 50-Service fleet of the scale run. What `cutover demo` needs (the emulated API
server, the engine doubles, the GitHub/Gitea double, the ArgoCD stand-in) ships in `cutover.demo` instead."""
