import torch
raise ImportError("no such package: flux")
