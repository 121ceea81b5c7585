"""rmqlab.inspect"""
