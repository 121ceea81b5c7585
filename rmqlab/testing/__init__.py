"""rmqlab.testing"""
