"""The simulated world behind `cutover demo`: an emulated Kubernetes API (kmock), engine doubles, a GitHub/Gitea
double over a real bare repository, an ArgoCD stand-in and the reference scenario; `story` narrates a cutover on
it. Installed with the `demo` extra, never in the image (.dockerignore, packaging/prune.py); the tests build on it
too. Doubles that only the tests and benchmarks use live in tests/doubles/."""
