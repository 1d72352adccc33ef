"""ArgoCD: the Application's operation read as rules, its API, and the render check through it."""
